package tracking

import (
	"context"
	"errors"
	"testing"

	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/modules/tracking/domain"
)

// TestTrackingCustomerViewAndRecon: with a gap open the customer sees the
// last trusted status flagged 同步中 and 数据待补全 (never a status nobody
// reported); reconciliation finds the open gap, heals it by queueing its
// backfill once, and verifies it on the next run after the gap closed, with
// the current state the highest trusted version and no applied regression.
func TestTrackingCustomerViewAndRecon(t *testing.T) {
	runBoth(t, testCustomerViewAndRecon, testCustomerViewAndRecon)
}

func testCustomerViewAndRecon[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	m, _ := e.module(t)
	rc := m.Host().Recon
	if _, err := m.CustomerView(ctx, "cnhub", "WB9001"); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("a waybill never seen: %v", err)
	}
	ingestOne(t, m, "cnhub", `{"events":[`+cnEvent(1, "COLLECT")+`]}`)
	ingestOne(t, m, "cnhub", `{"events":[`+cnEvent(3, "ARRIVE")+`]}`)
	v, err := m.CustomerView(ctx, "cnhub", "WB9001")
	if err != nil {
		t.Fatal(err)
	}
	if v.Milestone != domain.Arrived || v.StatusZH != "到港" || !v.Syncing || !v.Incomplete || v.UpdatedAt == nil {
		t.Fatalf("view with a gap: %+v", v)
	}
	if f := v.Flags("zh"); len(f) != 2 || f[0] != "同步中" || f[1] != "数据待补全" {
		t.Fatalf("flags: %v", f)
	}
	run, err := rc.Run(ctx, ReconName, e.Clock.Now().Add(1))
	if err != nil || run.State != "succeeded" && run.Error != "" {
		t.Fatalf("recon run: %+v %v", run, err)
	}
	ds, err := rc.ListDiscrepancies(ctx, keelrecon.DiscrepancyFilter{Reconciler: ReconName})
	if err != nil || len(ds) != 1 || ds[0].Class != keelrecon.MissingOurs || ds[0].Key != "cnhub/WB9001" || ds[0].State != keelrecon.StateAutoHealed {
		t.Fatalf("discrepancies: %+v %v", ds, err)
	}
	if n := e.Count(t, "SELECT count(*) FROM keel_job WHERE kind = 'tracking.backfill'"); n != 2 {
		t.Fatalf("backfills after the heal: %d, want the gap's own and the heal's", n)
	}
	e.Clock.Add(1e9)
	ingestOne(t, m, "cnhub", `{"events":[`+cnEvent(2, "EXPORT")+`]}`)
	v, _ = m.CustomerView(ctx, "cnhub", "WB9001")
	if v.Milestone != domain.Arrived || v.Syncing || v.Incomplete {
		t.Fatalf("view after the gap closed: %+v", v)
	}
	if _, err := rc.Run(ctx, ReconName, e.Clock.Now().Add(1)); err != nil {
		t.Fatal(err)
	}
	ds, _ = rc.ListDiscrepancies(ctx, keelrecon.DiscrepancyFilter{Reconciler: ReconName})
	if len(ds) != 1 || ds[0].State != keelrecon.StateVerified {
		t.Fatalf("after the gap closed: %+v", ds)
	}
}
