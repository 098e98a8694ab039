package tracking

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/ingest"
)

func cnEvent(seq int, code string) string {
	return fmt.Sprintf(`{"event_id":"cn-WB9001-%d","waybill":"WB9001","seq":%d,"code":"%s","occurred_at":"2026-12-01T%02d:%02d:00+08:00","location":"节点%d"}`,
		seq, seq, code, 8+seq/60, seq%60, seq)
}

// TestTrackingOutOfOrderGap is the seed's 数据演绎 10: waybill WB9001 is at
// version 41; 43 (已清关) arrives first: the aggregate moves to 43, gap 42
// opens and its backfill is queued on the backfill share; 42 (到达口岸)
// arrives later: its detail is kept, the gap closes, and the aggregate stays
// at 43 throughout.
func TestTrackingOutOfOrderGap(t *testing.T) { runBoth(t, testOutOfOrderGap, testOutOfOrderGap) }

func testOutOfOrderGap[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	m, _ := e.module(t)
	var first []string
	for s := 1; s <= 41; s++ {
		first = append(first, cnEvent(s, []string{"COLLECT", "EXPORT", "ARRIVE"}[min(s/15, 2)]))
	}
	if _, err := m.svc.Ingest(ctx, "cnhub", ingest.ViaWebhook, decode(t, `{"events":[`+strings.Join(first, ",")+`]}`)); err != nil {
		t.Fatal(err)
	}
	w, _ := m.store.GetWaybill(ctx, nil, "cnhub", "WB9001")
	if w.State.Seq != 41 || w.State.Milestone != domain.Arrived {
		t.Fatalf("at 41: %+v", w.State)
	}
	r43 := ingestOne(t, m, "cnhub", `{"events":[`+cnEvent(43, "CUSTOMS")+`]}`)
	if r43.Outcome != domain.Advanced || len(r43.GapsOpened) != 1 || r43.GapsOpened[0] != 42 {
		t.Fatalf("43: %+v", r43)
	}
	w, _ = m.store.GetWaybill(ctx, nil, "cnhub", "WB9001")
	if w.State.Seq != 43 || w.State.Milestone != domain.Customs {
		t.Fatalf("after 43: %+v", w.State)
	}
	gaps, _ := m.store.Gaps(ctx, nil, "cnhub", "WB9001")
	if len(gaps) != 1 || gaps[0].Seq != 42 || gaps[0].ClosedAt != nil {
		t.Fatalf("gaps after 43: %+v", gaps)
	}
	if n := e.Count(t, "SELECT count(*) FROM keel_job WHERE kind = 'tracking.backfill' AND flow_key = 'carrier:cnhub:backfill' AND queue = 'tracking'"); n != 1 {
		t.Fatalf("backfill jobs queued: %d, want 1", n)
	}
	revAt43 := w.State.Revision
	e.Clock.Add(20e9) // 20 s later, 42 arrives
	r42 := ingestOne(t, m, "cnhub", `{"events":[`+cnEvent(42, "ARRIVE")+`]}`)
	if r42.Outcome != domain.Detail || !r42.GapClosed {
		t.Fatalf("42: %+v", r42)
	}
	w, _ = m.store.GetWaybill(ctx, nil, "cnhub", "WB9001")
	if w.State.Seq != 43 || w.State.Milestone != domain.Customs || w.State.Revision != revAt43 {
		t.Fatalf("42 moved the aggregate: %+v", w.State)
	}
	gaps, _ = m.store.Gaps(ctx, nil, "cnhub", "WB9001")
	if len(gaps) != 1 || gaps[0].ClosedAt == nil || gaps[0].ClosedRawID != r42.RawID {
		t.Fatalf("gap 42 not closed by 42: %+v", gaps)
	}
	tl, _ := m.store.Timeline(ctx, "cnhub", "WB9001")
	if len(tl) != 43 || tl[41].Seq != 42 || tl[41].Outcome != string(domain.Detail) || !strings.Contains(tl[41].Payload, "节点42") {
		t.Fatalf("42's detail not kept in order: %d entries, [41]=%+v", len(tl), tl[41])
	}
	// The changes left through the outbox with the aggregate's revision
	// (one per committed change: the push of 1..41, then 43), and the late
	// event as a detail fill.
	if n := e.Count(t, "SELECT count(*) FROM keel_events_outbox WHERE topic = 'tracking.waybill.changed' AND event_key = 'cnhub:WB9001'"); n != 2 {
		t.Fatalf("change events %d, want one per committed change (2)", n)
	}
	for id, want := range map[string]string{"cnhub:WB9001:r41": `"steps"`, fmt.Sprintf("cnhub:WB9001:r%d", revAt43): `"gaps_opened":[42]`} {
		if n := e.Count(t, "SELECT count(*) FROM keel_events_outbox WHERE topic = 'tracking.waybill.changed' AND event_id = $1 AND payload LIKE $2",
			id, "%"+want+"%"); n != 1 {
			t.Fatalf("change event %s with %s: %d", id, want, n)
		}
	}
	if n := e.Count(t, "SELECT count(*) FROM keel_events_outbox WHERE topic = 'tracking.waybill.detail' AND event_id = $1",
		fmt.Sprintf("cnhub:WB9001:e%d", r42.RawID)); n != 1 {
		t.Fatalf("detail event: %d", n)
	}
}

// TestTrackingUnmappedWaits: a code no mapping knows is kept but advances
// nothing until a mapping version maps it.
func TestTrackingUnmappedWaits(t *testing.T) { runBoth(t, testUnmappedWaits, testUnmappedWaits) }

func testUnmappedWaits[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	m, _ := e.module(t)
	ingestOne(t, m, "cnhub", `{"events":[`+cnEvent(1, "COLLECT")+`]}`)
	r := ingestOne(t, m, "cnhub", `{"events":[`+cnEvent(2, "HANDOVER_PARTNER")+`]}`)
	if r.Outcome != domain.Unmapped {
		t.Fatalf("unknown code: %+v", r)
	}
	w, _ := m.store.GetWaybill(ctx, nil, "cnhub", "WB9001")
	if w.State.Seq != 1 || w.State.Milestone != domain.PickedUp {
		t.Fatalf("an unmapped event advanced: %+v", w.State)
	}
}

// TestTrackingNoRegression is the property: any permutation, with
// duplicates, of a waybill's events ends in the same aggregate, and the
// aggregate never moves back on the way (its source sequence and revision
// never decrease, and no delivered parcel returns to an earlier milestone).
// It runs the pure decision over many random orders for sequenced and
// unsequenced carriers, then the real store on both databases.
func TestTrackingNoRegression(t *testing.T) {
	t.Run("domain", func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		for trial := 0; trial < 2000; trial++ {
			evs, sequenced := randomHistory(r)
			want := foldAll(t, evs, sequenced)
			for p := 0; p < 5; p++ {
				perm := permuteWithDuplicates(r, evs)
				if got := foldAll(t, perm, sequenced); got.Milestone != want.Milestone || got.Seq != want.Seq || got.EventKey != want.EventKey {
					t.Fatalf("trial %d: order changed the aggregate: %+v vs %+v (sequenced=%v)", trial, got, want, sequenced)
				}
			}
		}
	})
	runBoth(t, testNoRegressionStore, testNoRegressionStore)
}

func randomHistory(r *rand.Rand) ([]domain.Event, bool) {
	sequenced := r.IntN(2) == 0
	n := 1 + r.IntN(12)
	all := domain.Milestones
	var evs []domain.Event
	for i := 1; i <= n; i++ {
		ev := domain.Event{Key: fmt.Sprintf("k%02d", i), Milestone: all[r.IntN(len(all))],
			OccurredAt: t0.Add(time_(r.IntN(5))), TimeTrusted: r.IntN(4) > 0}
		if sequenced {
			ev.Seq = int64(i)
		}
		evs = append(evs, ev)
	}
	return evs, sequenced
}

func time_(n int) time.Duration { return time.Duration(n) * time.Hour }

func permuteWithDuplicates(r *rand.Rand, evs []domain.Event) []domain.Event {
	out := append([]domain.Event(nil), evs...)
	for i := 0; i < len(evs)/2+1; i++ {
		out = append(out, evs[r.IntN(len(evs))])
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// foldAll applies evs in order, checking monotonicity at every step.
func foldAll(t *testing.T, evs []domain.Event, sequenced bool) domain.State {
	var s domain.State
	seen := map[string]bool{}
	for _, ev := range evs {
		if seen[ev.Key] {
			continue // the raw store absorbs duplicates before Advance
		}
		seen[ev.Key] = true
		d := domain.Advance(s, ev, sequenced)
		if d.Next.Seq < s.Seq || d.Next.Revision < s.Revision {
			t.Fatalf("moved back: %+v → %+v on %+v", s, d.Next, ev)
		}
		if s.Milestone.Terminal() && d.Outcome == domain.Advanced && !sequenced && d.Next.Milestone != domain.DeliveryRevoked && !d.Next.Milestone.Terminal() {
			t.Fatalf("a terminal milestone fell back to %s", d.Next.Milestone)
		}
		s = d.Next
	}
	return s
}

func testNoRegressionStore[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	m, _ := e.module(t)
	r := rand.New(rand.NewPCG(7, 11))
	codes := []string{"COLLECT", "EXPORT", "ARRIVE", "CUSTOMS", "DELIVERING", "SIGNED", "EXCEPT"}
	var final []domain.State
	for trial := 0; trial < 6; trial++ {
		waybill := fmt.Sprintf("NR%04d", trial)
		var evs []string
		for s := 1; s <= 8; s++ {
			evs = append(evs, fmt.Sprintf(`{"event_id":"%s-%d","waybill":"%s","seq":%d,"code":"%s","occurred_at":"2026-12-01T10:%02d:00Z"}`,
				waybill, s, waybill, s, codes[(s*3+trial)%len(codes)], s))
		}
		// Same history, a random order with duplicates, one event per push.
		order := append([]string(nil), evs...)
		order = append(order, evs[r.IntN(len(evs))], evs[r.IntN(len(evs))])
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		var last domain.State
		for _, ev := range order {
			ingestOne(t, m, "cnhub", `{"events":[`+ev+`]}`)
			w, _ := m.store.GetWaybill(ctx, nil, "cnhub", waybill)
			if w.State.Seq < last.Seq || w.State.Revision < last.Revision {
				t.Fatalf("%s moved back: %+v → %+v", waybill, last, w.State)
			}
			last = w.State
		}
		gaps, _ := m.store.Gaps(ctx, nil, "cnhub", waybill)
		for _, g := range gaps {
			if g.ClosedAt == nil {
				t.Fatalf("%s: gap %d still open after every event arrived", waybill, g.Seq)
			}
		}
		if last.Seq != 8 || last.EventKey != fmt.Sprintf("id:%s-8", waybill) || last.Milestone != domain.Milestone(must(m, codes[(24+trial)%len(codes)])) {
			t.Fatalf("%s ended at %+v, want event 8", waybill, last)
		}
		final = append(final, last)
	}
	_ = final
}

func must[TTx any](m *Module[TTx], code string) domain.Milestone {
	c, _ := m.carrier("cnhub")
	return c.Codes[code]
}
