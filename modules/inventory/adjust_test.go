package inventory

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelrecon"
)

// TestInventoryAdjustmentApproval: an adjustment worth more than the
// threshold waits for a second approver (the requester may not approve
// it); approval books it as a ledger entry and resolves its conflict; a
// small one is booked at once.
func TestInventoryAdjustmentApproval(t *testing.T) {
	each(t, testApproval[pgx.Tx], testApproval[*sql.Tx])
}

func testApproval[TTx any](t *testing.T, e *tenv[TTx]) {
	alice := keel.WithActor(context.Background(), "alice")
	bob := keel.WithActor(context.Background(), "bob")
	m := e.build(t, map[string]string{"inventory.approval_minor": "50000"})
	e.start(t)
	seed(t, m, "WH1", "SKU1", 200) // unit value 1000: 50 units is the threshold
	small, err := m.Adjust(alice, AdjustRequest{Key: "count-1", Warehouse: "WH1", SKU: "SKU1", Delta: -3, Reason: "cycle count"})
	if err != nil || small.Adjustment.State != "applied" || small.Result.LedgerID == 0 {
		t.Fatalf("small adjustment: %+v %v", small, err)
	}
	res, err := m.Reserve(alice, ReserveRequest{OrderLine: "O1-1", Warehouse: "WH1", SKU: "SKU1", Qty: 60})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Release(alice, res.ReservationID, ReleaseRequest{Reason: "cancel"}); err != nil {
		t.Fatal(err)
	}
	late, err := m.Confirm(alice, res.ReservationID, ConfirmRequest{Receipt: "SHIP-9", StockVersion: 3})
	if err != nil || late.ConflictID == 0 {
		t.Fatalf("late confirm: %+v %v", late, err)
	}
	_, _, v := stock(t, e, "WH1", "SKU1")
	out, err := m.ResolveConflict(alice, late.ConflictID, ResolveRequest{Delta: -60, Reason: "the 60 units were shipped"})
	if err != nil || out.Adjustment.State != "awaiting_approval" || out.ApprovalID == 0 {
		t.Fatalf("large resolution: %+v %v; want it awaiting approval", out, err)
	}
	if _, _, v2 := stock(t, e, "WH1", "SKU1"); v2 != v {
		t.Fatalf("stock moved before approval: version %d → %d", v, v2)
	}
	c, _ := m.st.GetConflict(alice, e.DB, late.ConflictID)
	if c.State != "awaiting_approval" {
		t.Fatalf("conflict %s; want awaiting_approval", c.State)
	}
	if _, err := e.recon.Approvals().Approve(alice, out.ApprovalID, "looks right to me"); !errors.Is(err, keelrecon.ErrSelfApproval) {
		t.Fatalf("self-approval: %v; want ErrSelfApproval", err)
	}
	if _, err := e.recon.Approvals().Approve(bob, out.ApprovalID, "checked the shipment receipt"); err != nil {
		t.Fatal(err)
	}
	a, _ := m.st.GetAdjustment(alice, e.DB, out.Adjustment.ID)
	if a.State != "applied" || a.ApprovedBy != "bob" || a.LedgerID == 0 {
		t.Fatalf("after approval: %+v", a)
	}
	av, _, v3 := stock(t, e, "WH1", "SKU1")
	if v3 != v+1 || av != 200-3-60 {
		t.Fatalf("after approval: available %d version %d; want %d at %d", av, v3, 200-3-60, v+1)
	}
	c, _ = m.st.GetConflict(alice, e.DB, late.ConflictID)
	if c.State != "resolved" || c.AdjustmentID != a.ID {
		t.Fatalf("conflict after approval: %+v", c)
	}
	ap, _ := e.recon.Approvals().Get(alice, out.ApprovalID)
	if ap.State != keelrecon.ApprovalExecuted {
		t.Fatalf("approval %s; want executed", ap.State)
	}
	// A replay of the adjustment's key is the same adjustment.
	again, err := m.Adjust(alice, AdjustRequest{Key: "count-1", Warehouse: "WH1", SKU: "SKU1", Delta: -3, Reason: "cycle count"})
	if err != nil || !again.Result.Replayed || again.Adjustment.ID != small.Adjustment.ID {
		t.Fatalf("replay: %+v %v", again, err)
	}
	if _, err := m.Adjust(alice, AdjustRequest{Key: "count-1", Warehouse: "WH1", SKU: "SKU1", Delta: -4, Reason: "cycle count"}); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("reused key: %v", err)
	}
}
