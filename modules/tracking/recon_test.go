package tracking

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/ingest"
	"github.com/keelwork/keel/modules/tracking/sim"
)

// TestTrackingReconCarrierEvidence: reconciliation compares each waybill's
// final state with its raw evidence and with the carrier's own answer,
// asked on the carrier's simulator. A delivered waybill the carrier never
// confirmed is healed by a full query on the backfill share (counted at the
// simulator) and verified on the next run; a waybill at an event the
// carrier's answer does not list is missing on their side; an aggregate
// that folding its evidence does not give is a status mismatch; a waybill
// whose final state the carrier confirms is no discrepancy.
func TestTrackingReconCarrierEvidence(t *testing.T) {
	runBoth(t, testReconCarrierEvidence, testReconCarrierEvidence)
}

func testReconCarrierEvidence[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	c := domain.DemoCarriers()[0] // cnhub: sequenced, with event ids
	s := simCarrier(t, &c)
	rc, err := keelrecon.New(e.DB, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(&module.Host[TTx]{DB: e.DB, Logger: moduletest.Quiet(), Recon: rc}, WithCarriers(c))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &keel.Config{ID: "recon", Logger: moduletest.Quiet(), FetchPollInterval: 50 * time.Millisecond, PromoteInterval: 50 * time.Millisecond}
	if err := m.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	client := e.Run(t, cfg, rc, m)
	push := func(evs ...sim.Event) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"events": evs})
		if _, err := m.svc.Ingest(ctx, c.Code, ingest.ViaWebhook, decode(t, string(b))); err != nil {
			t.Fatal(err)
		}
	}
	cc, _ := m.carrier(c.Code)
	verified := func(wb string) bool {
		w, err := m.store.GetWaybill(ctx, nil, c.Code, wb)
		return err == nil && w.VerifiedAt != nil
	}
	// Delivered, confirmed by nobody yet.
	delivered := simJourney(&c, "RCA00001", 6)
	s.AddParcel(delivered...)
	push(delivered...)
	// Confirmed by the carrier's answer to a realtime query.
	agreed := simJourney(&c, "RCC00001", 3)
	s.AddParcel(agreed...)
	push(agreed...)
	// At an event (seq 4) the carrier's answer does not list.
	beyond := simJourney(&c, "RCB00001", 4)
	s.AddParcel(beyond[:3]...)
	push(beyond...)
	for _, wb := range []string{"RCC00001", "RCB00001"} {
		if _, err := client.InsertMany(ctx, []keel.InsertParams{ingest.RealtimeJob(cc, wb, "rt-"+wb)}); err != nil {
			t.Fatal(err)
		}
	}
	moduletest.WaitFor(t, 60*time.Second, "the realtime answers", func() bool { return verified("RCC00001") && verified("RCB00001") })
	// An aggregate its evidence does not give (moved back by hand).
	tampered := simJourney(&c, "RCD00001", 3)
	push(tampered...)
	if _, err := e.DB.Exec(ctx, "UPDATE tracking_waybill SET milestone = 'picked_up', seq = 1, event_key = 'id:cnhub-RCD00001-1' WHERE waybill = 'RCD00001'"); err != nil {
		t.Fatal(err)
	}

	byKey := func() map[string]*keelrecon.DiscrepancyRow {
		t.Helper()
		ds, err := rc.ListDiscrepancies(ctx, keelrecon.DiscrepancyFilter{Reconciler: ReconName})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*keelrecon.DiscrepancyRow{}
		for _, d := range ds {
			out[d.Key+" "+string(d.Class)] = d
		}
		return out
	}
	run, err := rc.Run(ctx, ReconName, time.Now())
	if err != nil || run.Error != "" {
		t.Fatalf("run: %+v %v", run, err)
	}
	ds := byKey()
	want := map[string]keelrecon.State{
		"cnhub/RCA00001 " + string(keelrecon.Other):          keelrecon.StateAutoHealed,
		"cnhub/RCB00001 " + string(keelrecon.MissingTheirs):  keelrecon.StateOpen,
		"cnhub/RCD00001 " + string(keelrecon.StatusMismatch): keelrecon.StateOpen,
	}
	if len(ds) != len(want) {
		t.Fatalf("discrepancies %d, want %d: %+v", len(ds), len(want), ds)
	}
	for k, st := range want {
		if d, ok := ds[k]; !ok || d.State != st {
			t.Fatalf("%s: %+v (want %s) among %+v", k, d, st, ds)
		}
	}
	// The heal asked the carrier on the backfill share, not realtime's.
	moduletest.WaitFor(t, 60*time.Second, "the verifying query", func() bool { return verified("RCA00001") })
	if st := s.Stats(); st.PerShare["backfill"] != 1 || st.PerShare["realtime"] != 2 {
		t.Fatalf("queries per share at the carrier: %+v", st.PerShare)
	}
	if _, err := rc.Run(ctx, ReconName, time.Now()); err != nil {
		t.Fatal(err)
	}
	ds = byKey()
	want["cnhub/RCA00001 "+string(keelrecon.Other)] = keelrecon.StateVerified
	for k, st := range want {
		if d, ok := ds[k]; !ok || d.State != st {
			t.Fatalf("after the heal, %s: %+v (want %s)", k, d, st)
		}
	}
	if len(ds) != len(want) {
		t.Fatalf("after the heal: %+v", ds)
	}
}
