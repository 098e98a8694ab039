package tracking

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/ingest"
	"github.com/keelwork/keel/modules/tracking/sim"
)

// quotaCarrier is the seed's 500/s carrier scaled down by 20: quota 25/s,
// realtime share 15/s, backfill share 10/s.
func quotaCarrier() domain.Carrier {
	c := domain.DemoCarriers()[0]
	c.Quota, c.RealtimeShare, c.BackfillShare, c.MaxConcurrent = 25, 15, 10, 4
	return c
}

// scaledCarrier is demo carrier code with its quota and shares divided by
// 20, as quotaCarrier does for the seed's carrier.
func scaledCarrier(t *testing.T, code string) domain.Carrier {
	for _, c := range domain.DemoCarriers() {
		if c.Code == code {
			c.Quota, c.RealtimeShare, c.BackfillShare, c.MaxConcurrent = c.Quota/20, c.RealtimeShare/20, c.BackfillShare/20, 4
			return c
		}
	}
	t.Fatalf("no demo carrier %q", code)
	return domain.Carrier{}
}

// TestTrackingQuotaPerCarrier reports and checks the quota accuracy of each
// demo carrier whose events carry a sequence (a gap, hence a backfill, is
// a missing sequence number: the postal ePacket route carries none, so it
// never backfills and its realtime share is the limiter checked above),
// each scaled by 1/20 and measured at its own simulator: the same checks as
// TestTrackingQuotaShares, with 4 s of backfill work on each share.
func TestTrackingQuotaPerCarrier(t *testing.T) {
	for _, code := range []string{"cnhub", "swiftx"} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			e := newEnv(moduletest.Postgres(t, lines))
			testQuotaShares(t, e, scaledCarrier(t, code), nil)
		})
	}
}

// TestTrackingQuotaShares is the seed's 20,000 gaps on a 200/s backfill
// share (at least 100 s), scaled by 1/20 in rate and 1/500 in gaps: 40 gaps
// on a 10/s share take at least 3.9 s, and measured at the simulator no
// one-second window holds more than a share's rate or the quota, the
// simulator never answers 429, and realtime queries on their own share
// finish at their own pace while the backfill backlog waits. On PostgreSQL
// two Keel processes share the work: the test's own and a second OS process
// (startProcess) on the same schema, both claiming under the one quota; on
// SQLite, one.
func TestTrackingQuotaShares(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		e := newEnv(moduletest.Postgres(t, lines))
		dsn := testdb.PoolURL(t)
		var other *proc
		testQuotaShares(t, e, quotaCarrier(), func(c domain.Carrier) {
			other = startProcess(t, dsn, e.Schema, "quota-1", []domain.Carrier{c})
		})
		// Both processes claimed under the one quota (the windows above
		// were measured over both): the other one completed jobs too.
		if n := other.Completed(t); n == 0 {
			t.Errorf("the second Keel process completed no job: the quota was not shared across processes")
		} else {
			t.Logf("the second Keel process completed %d jobs", n)
		}
	})
	if moduletest.SQLiteLeftApart(t) {
		return
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		e := newEnv(moduletest.SQLite(t, lines))
		testQuotaShares(t, e, quotaCarrier(), nil)
	})
}

// testQuotaShares runs one instance in the test process; other, when not
// nil, starts the other Keel process once the carrier's simulator is up.
func testQuotaShares[TTx any](t *testing.T, e *env[TTx], c domain.Carrier, other func(domain.Carrier)) {
	ctx := context.Background()
	s := simCarrier(t, &c)
	// The carrier holds what it granted each share, as it holds the quota:
	// a query past either is answered 429 at the carrier's side, so the
	// limits hold there whatever delays a loaded machine puts between our
	// claims and its meter; our claims' pacing only keeps those 429s rare.
	s.ShareQuota = map[string]float64{"realtime": c.RealtimeShare, "backfill": c.BackfillShare}
	// Four seconds of backfill work on its share, and a second of realtime
	// work on its own (40 and 15 for the seed's carrier).
	gaps, realtime := int(4*c.BackfillShare), int(c.RealtimeShare)
	inst := startInstance(t, e, "quota-0", []domain.Carrier{c})
	if other != nil {
		other(c)
	}
	m := inst.m
	gapParcels(t, m, s, "QS", gaps)
	// Realtime queries arrive while the backfill backlog is deep.
	cc, _ := m.carrier(c.Code)
	rtStart := time.Now()
	var rt []string
	for i := 0; i < realtime; i++ {
		wb := fmt.Sprintf("RT%05d", i) // parcels without gaps: realtime must not fill the backfill's work
		s.AddParcel(sim.Journey(s.Config, wb, 3, time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC), time.Hour)...)
		rt = append(rt, wb)
		if _, err := inst.client.InsertMany(ctx, []keelInsert{ingest.RealtimeJob(cc, wb, "rt-"+wb)}); err != nil {
			t.Fatal(err)
		}
	}
	// The waits below are bounds for a loaded machine (on SQLite every
	// query's ingestion shares the one writer), not speed.
	moduletest.WaitFor(t, 120*time.Second, "the realtime queries", func() bool {
		return s.Stats().PerShare["realtime"] >= realtime
	})
	rtTook := time.Since(rtStart)
	moduletest.WaitFor(t, 180*time.Second, "every gap to close", func() bool {
		n := e.Count(t, "SELECT count(*) FROM tracking_gap WHERE closed_at IS NULL")
		return n == 0
	})
	st := s.Stats()
	bf := s.ShareTimes("backfill")
	if len(bf) != gaps {
		t.Fatalf("backfill queries %d, want one per gap (%d)", len(bf), gaps)
	}
	span := bf[len(bf)-1].Sub(bf[0])
	minSpan := time.Duration(float64(gaps-1) / c.BackfillShare * float64(time.Second))
	t.Logf("%s: %d gaps on a %.0f/s share: %s; realtime %d queries in %s; max 1 s windows: backfill %d, realtime %d, total %d; 429s %d",
		c.Code, gaps, c.BackfillShare, span.Round(time.Millisecond), realtime, rtTook.Round(time.Millisecond),
		st.MaxWindowShare["backfill"], st.MaxWindowShare["realtime"], st.MaxWindow, st.Refused)
	if span < minSpan {
		t.Errorf("%d gaps took %s on a %.0f/s share; at least %s", gaps, span, c.BackfillShare, minSpan)
	}
	if st.MaxWindowShare["backfill"] > int(c.BackfillShare) || st.MaxWindowShare["realtime"] > int(c.RealtimeShare) || float64(st.MaxWindow) > c.Quota {
		t.Errorf("a one-second window went over a share or the quota: %+v", st)
	}
	// Pacing keeps the carrier's refusals rare, and a refused query waits
	// its Retry-After rather than hammering the meter.
	if st.Refused > gaps/10 {
		t.Errorf("the simulator answered 429 %d times for %d gaps and %d realtime queries", st.Refused, gaps, realtime)
	}
	// Realtime ran on its own share, not behind the backfill backlog: 15
	// queries at 15/s need about a second where the backlog needs four; on
	// a loaded machine (the race detector, other tests) both slow down, so
	// the check is that realtime finished well before the backlog drained.
	rts := s.ShareTimes("realtime")
	lastRT := rts[len(rts)-1]
	// On SQLite every query's ingestion waits for the one writer, which
	// both shares share: there the shares' rates and windows are checked,
	// their independence on PostgreSQL.
	if limit := time.Duration(float64(realtime)/cc.Rate(c.RealtimeShare)*float64(time.Second)) + 1500*time.Millisecond; e.DB.Dialect() == "postgres" && rtTook > limit &&
		(!lastRT.Before(bf[len(bf)-1]) || float64(rtTook) > 0.75*float64(bf[len(bf)-1].Sub(rtStart))) {
		t.Errorf("realtime queries took %s behind the backfill backlog (drained %s after they were queued)", rtTook, bf[len(bf)-1].Sub(rtStart))
	}
	moduletest.WaitFor(t, 60*time.Second, "the realtime queries to verify their waybills", func() bool {
		for _, wb := range rt {
			if w, err := m.store.GetWaybill(ctx, nil, c.Code, wb); err != nil || w.VerifiedAt == nil {
				return false
			}
		}
		return true
	})
}
