package inventory

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/modules/inventory/sim"
)

// TestInventoryReconciliation seeds a difference of each kind and checks
// each reconciler finds exactly it: a balance moved without a ledger row,
// a reservation whose end state its ledger does not explain, confirmed
// shipments the warehouse has no receipt for (and the other way, and a
// quantity that differs), the projection's lag, and a physical count that
// differs from the books on two SKUs by +5 and -5 (found as two, not
// netted away). A rerun at the same cutoff is identical; fixing the count
// with adjustment entries is verified by the next run.
func TestInventoryReconciliation(t *testing.T) {
	each(t, testRecon[pgx.Tx], testRecon[*sql.Tx])
}

// TestInventoryReconShipmentsWindow: a confirmation made after a run's
// cutoff, whose receipt the warehouse already has, is not "shipped but not
// confirmed here" in that run (the receipts carry no time of their own).
func TestInventoryReconShipmentsWindow(t *testing.T) {
	each(t, testReconWindow[pgx.Tx], testReconWindow[*sql.Tx])
}

// reconModule starts the module on e against a warehouse simulator, with
// no event consumers: reconciliation tests drive everything by hand.
func reconModule[TTx any](t *testing.T, e *tenv[TTx]) (*Module[TTx], *sim.Warehouse) {
	t.Helper()
	wh, err := sim.NewWarehouse()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wh.Close(context.Background()) })
	m := e.build(t, map[string]string{"inventory.warehouse_url": wh.URL()}, WithoutConsumers())
	e.start(t)
	return m, wh
}

func testReconWindow[TTx any](t *testing.T, e *tenv[TTx]) {
	ctx := keel.WithActor(context.Background(), "auditor")
	m, wh := reconModule(t, e)
	seed(t, m, "WH1", "SKU1", 100)
	cutoff := time.Now().UTC().Truncate(time.Microsecond)
	time.Sleep(time.Millisecond) // the confirmation is strictly after the cutoff
	r, err := m.Reserve(ctx, ReserveRequest{OrderLine: "W1", Warehouse: "WH1", SKU: "SKU1", Qty: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Confirm(ctx, r.ReservationID, ConfirmRequest{Receipt: "S-window", StockVersion: 1}); err != nil {
		t.Fatal(err)
	}
	wh.Ship(sim.Receipt{ReservationID: r.ReservationID, Receipt: "S-window", Warehouse: "WH1", SKU: "SKU1", Qty: 1})
	run, err := e.recon.Run(ctx, ReconShipments, cutoff)
	if err != nil || run.State != "succeeded" {
		t.Fatalf("run: %+v %v", run, err)
	}
	ds, err := e.recon.ListDiscrepancies(ctx, keelrecon.DiscrepancyFilter{Reconciler: ReconShipments, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.LastRunID == run.ID {
			t.Errorf("run at a cutoff before the confirmation found %s %s", d.Class, d.Key)
		}
	}
}

func testRecon[TTx any](t *testing.T, e *tenv[TTx]) {
	ctx := keel.WithActor(context.Background(), "auditor")
	m, wh := reconModule(t, e)
	for _, s := range []string{"SKU1", "SKU2", "SKU3"} {
		seed(t, m, "WH1", s, 100)
	}
	reserve := func(line, sku string, qty int64) int64 {
		t.Helper()
		r, err := m.Reserve(ctx, ReserveRequest{OrderLine: line, Warehouse: "WH1", SKU: sku, Qty: qty})
		if err != nil {
			t.Fatal(err)
		}
		return r.ReservationID
	}
	confirm := func(id int64) {
		t.Helper()
		if _, err := m.Confirm(ctx, id, ConfirmRequest{Receipt: fmt.Sprintf("S%d", id), StockVersion: 1}); err != nil {
			t.Fatal(err)
		}
	}
	ok := reserve("L1", "SKU1", 2)
	confirm(ok)
	wh.Ship(sim.Receipt{ReservationID: ok, Receipt: "S-ok", Warehouse: "WH1", SKU: "SKU1", Qty: 2})
	noReceipt := reserve("L2", "SKU1", 1)
	confirm(noReceipt)
	notConfirmed := reserve("L3", "SKU2", 1)
	wh.Ship(sim.Receipt{ReservationID: notConfirmed, Receipt: "S-early", Warehouse: "WH1", SKU: "SKU2", Qty: 1})
	wrongQty := reserve("L4", "SKU2", 3)
	confirm(wrongQty)
	wh.Ship(sim.Receipt{ReservationID: wrongQty, Receipt: "S-qty", Warehouse: "WH1", SKU: "SKU2", Qty: 2})
	unexplained := reserve("L5", "SKU3", 1)
	// Seeded by hand, behind the module's back:
	if _, err := e.DB.Exec(ctx, "UPDATE inv_reservation SET state = 'released' WHERE id = $1", unexplained); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DB.Exec(ctx, "UPDATE inv_stock SET on_hand = on_hand + 5, available = available + 5 WHERE sku_id = 'SKU3'"); err != nil {
		t.Fatal(err)
	}
	onHand := func(sku string) int64 {
		st, err := m.st.GetStock(ctx, e.DB, "WH1", sku)
		if err != nil {
			t.Fatal(err)
		}
		return st.OnHand
	}
	sheet := fmt.Sprintf("warehouse,sku,counted\nWH1,SKU1,%d\nWH1,SKU2,%d\nWH1,SKU3,%d\n", onHand("SKU1")+5, onHand("SKU2")-5, onHand("SKU3"))
	if n, err := m.ImportCount(ctx, "C2026-11", strings.NewReader(sheet)); err != nil || n != 3 {
		t.Fatalf("import: %d %v", n, err)
	}
	if _, err := m.ImportCount(ctx, "C-bad", strings.NewReader("warehouse,sku,counted\nWH1,SKU1,-3\n")); err == nil {
		t.Fatal("a negative count was imported")
	}
	time.Sleep(time.Millisecond) // the cutoff is strictly after the seeded data
	cutoff := time.Now().UTC().Truncate(time.Microsecond)

	found := func(name string) (*keelrecon.Run, []string) {
		t.Helper()
		run, err := e.recon.Run(ctx, name, cutoff)
		if err != nil || run.State != "succeeded" {
			t.Fatalf("run %s: %+v %v", name, run, err)
		}
		ds, err := e.recon.ListDiscrepancies(ctx, keelrecon.DiscrepancyFilter{Reconciler: name, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, d := range ds {
			if d.State == keelrecon.StateOpen || d.State == keelrecon.StateAwaitingApproval {
				keys = append(keys, string(d.Class)+" "+d.Key)
			}
		}
		sort.Strings(keys)
		return run, keys
	}
	r := func(id int64) string { return fmt.Sprintf("reservation:%d", id) }
	for name, want := range map[string][]string{
		ReconBalance:    {"amount_mismatch WH1/SKU3"},
		ReconEndState:   {"status_mismatch " + r(unexplained)},
		ReconShipments:  {"amount_mismatch " + r(wrongQty), "missing_ours " + r(notConfirmed), "missing_theirs " + r(noReceipt)},
		ReconProjection: {"other WH1/SKU1", "other WH1/SKU2", "other WH1/SKU3"},
		ReconCount:      {"amount_mismatch WH1/SKU1", "amount_mismatch WH1/SKU2"},
	} {
		run1, got := found(name)
		sort.Strings(want)
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s found %v; want %v", name, got, want)
		}
		run2, again := found(name)
		if run1.Digest != run2.Digest || strings.Join(got, "|") != strings.Join(again, "|") || run2.Found != run1.Found {
			t.Errorf("%s rerun differs: %s/%d vs %s/%d", name, run1.Digest, run1.Found, run2.Digest, run2.Found)
		}
	}
	// Fix the count by adjustment entries; the next run verifies them.
	ds, err := e.recon.ListDiscrepancies(ctx, keelrecon.DiscrepancyFilter{Reconciler: ReconCount, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if _, err := e.recon.Execute(ctx, d.ID, "book the count"); err != nil {
			t.Fatalf("executing %s: %v", d.Key, err)
		}
	}
	if onHand("SKU1") != 100-2-1+5 {
		t.Fatalf("SKU1 on hand %d after the count's adjustment", onHand("SKU1"))
	}
	if n := e.Count(t, "SELECT count(*) FROM inv_ledger WHERE movement = 'adjust'"); n != 2 {
		t.Fatalf("%d adjustment entries; want 2", n)
	}
	cutoff = time.Now().UTC().Truncate(time.Microsecond)
	time.Sleep(time.Millisecond)
	run, left := found(ReconCount)
	if len(left) != 0 || run.Verified != 2 {
		t.Fatalf("after the fix: %v open, %d verified; want none open, 2 verified", left, run.Verified)
	}
}
