package tracking

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelpgx"
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

// TestTrackingQuotaShares is the seed's 20,000 gaps on a 200/s backfill
// share (at least 100 s), scaled by 1/20 in rate and 1/500 in gaps: 40 gaps
// on a 10/s share take at least 3.9 s, and measured at the simulator no
// one-second window holds more than a share's rate or the quota, the
// simulator never answers 429, and realtime queries on their own share
// finish at their own pace while the backfill backlog waits. On PostgreSQL
// two engine clients (two processes' worth of claimers) share the work; on
// SQLite, one.
func TestTrackingQuotaShares(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		d, schema := testdb.OpenPostgres(t, &testdb.Options{Lines: lines})
		e := &env[pgx.Tx]{driver: d, db: keelsqlPgx(d), schema: schema, clock: &clock{t: t0}}
		// A second driver on the same schema: the other process.
		other, err := keelpgx.Open(context.Background(), testdb.PostgresURL(t), &keelpgx.Config{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = other.Close() })
		testQuotaShares(t, e, []keeldriver.Driver[pgx.Tx]{d, other})
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		d, _ := testdb.OpenSQLite(t, &testdb.Options{Lines: lines})
		e := &env[*sql.Tx]{driver: d, db: keelsqlSQLite(d), clock: &clock{t: t0}}
		testQuotaShares(t, e, []keeldriver.Driver[*sql.Tx]{d})
	})
}

func testQuotaShares[TTx any](t *testing.T, e *env[TTx], drivers []keeldriver.Driver[TTx]) {
	ctx := context.Background()
	c := quotaCarrier()
	s := simCarrier(t, &c)
	// The carrier holds what it granted each share, as it holds the quota:
	// a query past either is answered 429 at the carrier's side, so the
	// limits hold there whatever delays a loaded machine puts between our
	// claims and its meter; our claims' pacing only keeps those 429s rare.
	s.ShareQuota = map[string]float64{"realtime": c.RealtimeShare, "backfill": c.BackfillShare}
	const gaps, realtime = 40, 15
	var insts []*instance[TTx]
	for i, d := range drivers {
		insts = append(insts, startInstance(t, e, d, fmt.Sprintf("quota-%d", i), []domain.Carrier{c}))
	}
	m := insts[0].m
	gapParcels(t, m, s, "QS", gaps)
	// Realtime queries arrive while the backfill backlog is deep.
	cc, _ := m.carrier(c.Code)
	rtStart := time.Now()
	var rt []string
	for i := 0; i < realtime; i++ {
		wb := fmt.Sprintf("RT%05d", i) // parcels without gaps: realtime must not fill the backfill's work
		s.AddParcel(sim.Journey(s.Config, wb, 3, time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC), time.Hour)...)
		rt = append(rt, wb)
		if _, err := insts[i%len(insts)].client.InsertMany(ctx, []keelInsert{ingest.RealtimeJob(cc, wb, "rt-"+wb)}); err != nil {
			t.Fatal(err)
		}
	}
	// The waits below are bounds for a loaded machine (on SQLite every
	// query's ingestion shares the one writer), not speed.
	waitFor(t, 120*time.Second, "the realtime queries", func() bool {
		return s.Stats().PerShare["realtime"] >= realtime
	})
	rtTook := time.Since(rtStart)
	waitFor(t, 180*time.Second, "every gap to close", func() bool {
		n := count(t, e, "SELECT count(*) FROM tracking_gap WHERE closed_at IS NULL")
		return n == 0
	})
	st := s.Stats()
	bf := s.ShareTimes("backfill")
	if len(bf) != gaps {
		t.Fatalf("backfill queries %d, want one per gap (%d)", len(bf), gaps)
	}
	span := bf[len(bf)-1].Sub(bf[0])
	minSpan := time.Duration(float64(gaps-1) / c.BackfillShare * float64(time.Second))
	t.Logf("%d gaps on a %.0f/s share: %s; realtime %d queries in %s; max 1 s windows: backfill %d, realtime %d, total %d; 429s %d",
		gaps, c.BackfillShare, span.Round(time.Millisecond), realtime, rtTook.Round(time.Millisecond),
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
	if limit := time.Duration(float64(realtime)/cc.Rate(c.RealtimeShare)*float64(time.Second)) + 1500*time.Millisecond; e.db.Dialect() == "postgres" && rtTook > limit &&
		(!lastRT.Before(bf[len(bf)-1]) || float64(rtTook) > 0.75*float64(bf[len(bf)-1].Sub(rtStart))) {
		t.Errorf("realtime queries took %s behind the backfill backlog (drained %s after they were queued)", rtTook, bf[len(bf)-1].Sub(rtStart))
	}
	waitFor(t, 60*time.Second, "the realtime queries to verify their waybills", func() bool {
		for _, wb := range rt {
			if w, err := m.store.GetWaybill(ctx, nil, c.Code, wb); err != nil || w.VerifiedAt == nil {
				return false
			}
		}
		return true
	})
}
