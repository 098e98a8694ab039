package tracking

import (
	"context"
	"testing"
	"time"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/tracking/domain"
)

// TestTrackingBreakerIsolation: one carrier goes down; its backfill
// share's breaker opens after consecutive failures and its queries stop,
// while the other carrier's gaps all close at their own pace; when the
// carrier comes back, a half-open probe succeeds, the breaker closes and
// its gaps close too.
func TestTrackingBreakerIsolation(t *testing.T) {
	runBoth(t, testBreakerIsolation, testBreakerIsolation)
}

func testBreakerIsolation[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	down, up := domain.DemoCarriers()[0], domain.DemoCarriers()[2]
	for _, c := range []*domain.Carrier{&down, &up} {
		c.Quota, c.RealtimeShare, c.BackfillShare = 60, 20, 40
		c.BreakerFailures, c.BreakerCooldown, c.BreakerProbes, c.MaxConcurrent = 3, domain.Duration(time.Second), 1, 4
	}
	sDown, sUp := simCarrier(t, &down), simCarrier(t, &up)
	sDown.SetDown(true)
	in := startInstance(t, e, "breaker", []domain.Carrier{down, up})
	m := in.m
	gapParcels(t, m, sDown, "BD", 10)
	gapParcels(t, m, sUp, "BU", 10)
	openGaps := func(carrier string) int64 {
		return e.Count(t, "SELECT count(*) FROM tracking_gap WHERE closed_at IS NULL AND carrier = $1", carrier)
	}
	breaker := func(key string) keeltype.BreakerState {
		row, err := in.client.FlowKeyGet(ctx, key)
		if err != nil || row == nil {
			return ""
		}
		return row.BreakerState
	}
	start := time.Now()
	// Bounds for a loaded machine (on SQLite every query's ingestion and
	// every failed attempt of the down carrier share the one writer), not
	// speed: what is checked is that the healthy carrier's gaps close
	// while the other's stay open behind its breaker.
	moduletest.WaitFor(t, 60*time.Second, "the healthy carrier's gaps", func() bool { return openGaps(up.Code) == 0 })
	healthy := time.Since(start)
	moduletest.WaitFor(t, 20*time.Second, "the down carrier's breaker to open", func() bool { return breaker(down.BackfillKey()) == keeltype.BreakerOpen })
	if n := openGaps(down.Code); n != 10 {
		t.Fatalf("the down carrier's gaps: %d open, want 10", n)
	}
	if b := breaker(up.BackfillKey()); b == keeltype.BreakerOpen {
		t.Fatalf("the healthy carrier's breaker is %s", b)
	}
	if st := sUp.Stats(); st.PerShare["backfill"] != 10 || st.Refused != 0 {
		t.Errorf("the healthy carrier served %+v", st)
	}
	// Open: no query reaches the down carrier's side... it comes back.
	sDown.SetDown(false)
	moduletest.WaitFor(t, 60*time.Second, "the recovered carrier's gaps", func() bool { return openGaps(down.Code) == 0 })
	moduletest.WaitFor(t, 10*time.Second, "the breaker to close", func() bool { return breaker(down.BackfillKey()) == keeltype.BreakerClosed })
	t.Logf("healthy carrier done in %s while the other was down; recovered after its cool-down and a probe", healthy.Round(time.Millisecond))
}
