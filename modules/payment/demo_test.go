package payment

import (
	"context"
	"testing"
	"time"

	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/module/moduletest"
)

// TestPaymentDemo: keel dev's demo runs the simulator and leaves paid
// orders, a partial refund found by query after a timeout, a late success
// in manual review and an open discrepancy.
func TestPaymentDemo(t *testing.T) { each(t, testDemo, testDemo) }

func testDemo[TTx any](t *testing.T, e *tenv[TTx]) {
	e.start(t, startOpts{demo: true, noSweep: true})
	ctx := context.Background()
	moduletest.WaitFor(t, 120*time.Second, "the demo data", func() bool { return e.m.demo.done.Load() })
	if err, _ := e.m.demo.err.Load().(error); err != nil {
		t.Fatalf("demo: %v", err)
	}
	ds, _ := e.recon.ListDiscrepancies(ctx, keelrecon.DiscrepancyFilter{Reconciler: ReconChannel, Limit: 10})
	if len(ds) < 1 {
		t.Fatal("the demo left no discrepancy")
	}
	h, err := e.m.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.PaymentsManual != 1 || h.PaymentsPending != 1 {
		t.Fatalf("health %+v", h)
	}
	rs, _ := e.m.Refunds(ctx, RefundDone, "", "", 10)
	if len(rs) != 2 {
		t.Fatalf("%d refunds done, want 2", len(rs))
	}
}
