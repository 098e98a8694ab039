package tracking

import (
	"testing"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
)

// TestTrackingDemo: `keel dev`'s demo runs the three carriers' simulators
// and pushes demo parcels through the real webhook receiver, duplicated
// and out of order with gaps, which the backfills fill from the
// simulators' pull APIs: every parcel ends with no open gap.
func TestTrackingDemo(t *testing.T) { runBoth(t, testDemo, testDemo) }

func testDemo[TTx any](t *testing.T, e *env[TTx]) {
	m, err := New(&module.Host[TTx]{DB: e.DB, Logger: moduletest.Quiet(), Demo: true,
		Settings: map[string]string{"tracking.demo_parcels": "6", "tracking.demo_interval": "10ms", "tracking.backfill_recheck": "1s"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &keel.Config{Logger: moduletest.Quiet(), FetchPollInterval: 50 * time.Millisecond, PromoteInterval: 50 * time.Millisecond}
	if err := m.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	e.Run(t, cfg, m)
	if m.WebhookURL() == "" {
		t.Fatal("the demo's webhook receiver is not listening")
	}
	moduletest.WaitFor(t, 30*time.Second, "six demo parcels", func() bool {
		return e.Count(t, "SELECT count(*) FROM tracking_waybill") == 6
	})
	moduletest.WaitFor(t, 30*time.Second, "the demo's gaps to be backfilled", func() bool {
		return m.Life.Running() && e.Count(t, "SELECT count(*) FROM tracking_gap WHERE closed_at IS NULL") == 0 &&
			e.Count(t, "SELECT count(*) FROM tracking_gap") > 0
	})
	if n := e.Count(t, "SELECT count(*) FROM tracking_security"); n != 0 {
		t.Fatalf("the demo's own pushes were refused %d times", n)
	}
}
