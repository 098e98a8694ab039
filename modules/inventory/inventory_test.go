package inventory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"database/sql"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/modules/inventory/domain"
)

// TestInventoryNoOversell is the seed's 数据演绎 6: available 100, 200
// concurrent requests of 1: exactly 100 succeed, available ends at 0 and
// never goes negative (the CHECK would refuse it), 100 ledger rows and 100
// events. Through the plain row-lock path and through coalescing.
func TestInventoryNoOversell(t *testing.T) {
	for _, co := range []string{"false", "true"} {
		t.Run("coalesce="+co, func(t *testing.T) {
			t.Parallel()
			each(t, func(t *testing.T, e *tenv[pgx.Tx]) { testNoOversell(t, e, co) },
				func(t *testing.T, e *tenv[*sql.Tx]) { testNoOversell(t, e, co) })
		})
	}
	if threeProcesses != nil {
		t.Run("processes=3", func(t *testing.T) {
			t.Parallel()
			each(t, func(t *testing.T, e *tenv[pgx.Tx]) { threeProcesses(t, e) },
				func(t *testing.T, e *tenv[*sql.Tx]) { threeProcesses(t, e) })
		})
	}
}

// threeProcesses is the no-oversell case across three Keel processes
// (crash_test.go, on Linux).
var threeProcesses func(t *testing.T, e any)

func testNoOversell[TTx any](t *testing.T, e *tenv[TTx], coalesce string) {
	m := e.build(t, map[string]string{"inventory.coalesce": coalesce})
	seed(t, m, "WH1", "SKU1", 100)
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	ids := map[int64]bool{}
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := m.Reserve(context.Background(), ReserveRequest{OrderLine: fmt.Sprintf("O%d-1", i), Warehouse: "WH1", SKU: "SKU1", Qty: 1})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				outcomes["error: "+err.Error()]++
				return
			}
			outcomes[res.Outcome]++
			if res.Outcome == OutcomeApplied {
				ids[res.StockVersion] = true
			}
		}()
	}
	wg.Wait()
	if outcomes[OutcomeApplied] != 100 || outcomes[OutcomeInsufficient] != 100 || len(outcomes) != 2 {
		t.Fatalf("outcomes %v; want 100 applied and 100 insufficient", outcomes)
	}
	if len(ids) != 100 {
		t.Fatalf("%d distinct stock versions among 100 grants", len(ids))
	}
	av, rs, v := stock(t, e, "WH1", "SKU1")
	if av != 0 || rs != 100 || v != 101 {
		t.Fatalf("available %d reserved %d version %d; want 0, 100, 101", av, rs, v)
	}
	if n := e.Count(t, "SELECT count(*) FROM inv_ledger WHERE movement = 'reserve'"); n != 100 {
		t.Fatalf("%d reserve ledger rows; want 100", n)
	}
	if n := e.Count(t, "SELECT count(*) FROM keel_events_outbox WHERE topic = 'inventory.stock' AND event_type = 'inventory.reserve'"); n != 100 {
		t.Fatalf("%d reserve events; want 100", n)
	}
	// Every event's id is its ledger row's id.
	if n := e.Count(t, "SELECT count(*) FROM inv_ledger l JOIN keel_events_outbox o ON o.event_id = CAST(l.id AS TEXT) WHERE l.movement = 'reserve'"); n != 100 {
		t.Fatalf("%d ledger rows with their event; want 100", n)
	}
	if n := e.Count(t, "SELECT count(*) FROM inv_reservation WHERE state = 'failed'"); n != 100 {
		t.Fatalf("%d failed reservations; want 100", n)
	}
	if coalesce == "true" {
		cs := m.Coalescing()
		if cs.Fallbacks != 0 || cs.Requests < 200 || cs.Largest < 2 {
			t.Fatalf("coalescer %+v: want every request in a batch, some batches of several", cs)
		}
		t.Logf("coalescer: %+v", cs)
	}
}

// TestInventoryIdempotentActions: each action replayed returns its first
// result; the same key with other parameters is refused; confirm and
// release keys never collide (both are recorded for one reservation, and
// the loser is classified, not replayed as the winner).
func TestInventoryIdempotentActions(t *testing.T) {
	each(t, testIdempotent[pgx.Tx], testIdempotent[*sql.Tx])
}

func testIdempotent[TTx any](t *testing.T, e *tenv[TTx]) {
	ctx := context.Background()
	m := e.build(t, nil)
	seed(t, m, "WH1", "SKU1", 10)
	req := ReserveRequest{OrderLine: "O1-1", Warehouse: "WH1", SKU: "SKU1", Qty: 3}
	first, err := m.Reserve(ctx, req)
	if err != nil || first.Outcome != OutcomeApplied || first.Replayed {
		t.Fatalf("reserve: %+v %v", first, err)
	}
	again, err := m.Reserve(ctx, req)
	if err != nil || !again.Replayed || again.ReservationID != first.ReservationID || again.LedgerID != first.LedgerID {
		t.Fatalf("replay: %+v %v; want the first result replayed", again, err)
	}
	other := req
	other.Qty = 4
	if _, err := m.Reserve(ctx, other); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("same key other qty: %v; want ErrKeyReused", err)
	}
	if av, _, _ := stock(t, e, "WH1", "SKU1"); av != 7 {
		t.Fatalf("available %d after replays; want 7", av)
	}
	id := first.ReservationID
	conf, err := m.Confirm(ctx, id, ConfirmRequest{Receipt: "R1", StockVersion: first.StockVersion})
	if err != nil || conf.Outcome != OutcomeApplied || conf.State != domain.Confirmed {
		t.Fatalf("confirm: %+v %v", conf, err)
	}
	conf2, err := m.Confirm(ctx, id, ConfirmRequest{Receipt: "R1", StockVersion: first.StockVersion})
	if err != nil || !conf2.Replayed || conf2.LedgerID != conf.LedgerID {
		t.Fatalf("confirm replay: %+v %v", conf2, err)
	}
	if _, err := m.Confirm(ctx, id, ConfirmRequest{Receipt: "R2", StockVersion: first.StockVersion}); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("confirm with another receipt: %v; want ErrKeyReused", err)
	}
	// The release has its own key: it is not the confirm's replay, but a
	// late release of a confirmed reservation (a conflict).
	rel, err := m.Release(ctx, id, ReleaseRequest{Reason: "customer cancel"})
	if err != nil || rel.Replayed || rel.Outcome != OutcomeConflict || rel.ConflictID == 0 {
		t.Fatalf("release after confirm: %+v %v; want a conflict", rel, err)
	}
	rel2, err := m.Release(ctx, id, ReleaseRequest{Reason: "again"})
	if err != nil || !rel2.Replayed || rel2.ConflictID != rel.ConflictID {
		t.Fatalf("release replay: %+v %v", rel2, err)
	}
	ret, err := m.Return(ctx, id, "damaged")
	if err != nil || ret.State != domain.Returning {
		t.Fatalf("return: %+v %v", ret, err)
	}
	if r, err := m.Return(ctx, id, "damaged"); err != nil || !r.Replayed {
		t.Fatalf("return replay: %+v %v", r, err)
	}
	got, err := m.ReturnReceived(ctx, id, "RR1")
	if err != nil || got.State != domain.Returned || got.LedgerID == 0 {
		t.Fatalf("return received: %+v %v", got, err)
	}
	if r, err := m.ReturnReceived(ctx, id, "RR1"); err != nil || !r.Replayed {
		t.Fatalf("return received replay: %+v %v", r, err)
	}
	// reserve, confirm, return: one ledger row each, never twice.
	if n := e.Count(t, "SELECT count(*) FROM inv_ledger WHERE reservation_id = $1", id); n != 3 {
		t.Fatalf("%d ledger rows for the reservation; want 3", n)
	}
	if n := e.Count(t, "SELECT count(*) FROM inv_action"); n != 6 {
		t.Fatalf("%d action records; want 6 (receive, reserve, confirm, release, return, return received)", n)
	}
	hist, err := m.st.HistoryOf(ctx, e.DB, id)
	if err != nil || len(hist) != 4 {
		t.Fatalf("history %+v %v; want 4 steps", hist, err)
	}
	// Bad input writes nothing.
	before := e.Count(t, "SELECT count(*) FROM inv_action")
	for _, bad := range []ReserveRequest{
		{OrderLine: "O2-1", Warehouse: "WH1", SKU: "SKU1", Qty: 0},
		{OrderLine: "O2-1", Warehouse: "WH1", SKU: "SKU1", Qty: -5},
		{OrderLine: "O2-1", Warehouse: "WH1", SKU: "SKU1", Qty: 1 << 40},
		{OrderLine: "bad key", Warehouse: "WH1", SKU: "SKU1", Qty: 1},
	} {
		if _, err := m.Reserve(ctx, bad); !errors.Is(err, domain.ErrInvalid) {
			t.Errorf("%+v: %v; want invalid", bad, err)
		}
	}
	if _, err := m.Reserve(ctx, ReserveRequest{OrderLine: "O3-1", Warehouse: "WH1", SKU: "NOPE", Qty: 1}); !errors.Is(err, ErrUnknownSKU) {
		t.Errorf("unknown SKU: %v", err)
	}
	if _, err := m.Reserve(ctx, ReserveRequest{OrderLine: "O3-1", Warehouse: "WH9", SKU: "SKU1", Qty: 1}); !errors.Is(err, ErrUnknownWH) {
		t.Errorf("unknown warehouse: %v", err)
	}
	if after := e.Count(t, "SELECT count(*) FROM inv_action"); after != before {
		t.Errorf("bad input wrote %d action records", after-before)
	}
}

// TestInventoryOutOfOrder: a release moves the stock from version 8 to
// 9; a late confirm carrying version 8 changes nothing and opens a
// conflict ticket with evidence; the resolution is an adjustment entry
// with a higher version and a reason, never an overwrite.
func TestInventoryOutOfOrder(t *testing.T) {
	each(t, testOutOfOrder[pgx.Tx], testOutOfOrder[*sql.Tx])
}

func testOutOfOrder[TTx any](t *testing.T, e *tenv[TTx]) {
	ctx := context.Background()
	m := e.build(t, nil)
	seed(t, m, "WH1", "SKU1", 0)
	// Seven receipts bring the pair to version 7; the reservation makes 8.
	for i := range 7 {
		if _, err := m.Receive(ctx, fmt.Sprintf("GR%d", i), "WH1", "SKU1", 5); err != nil {
			t.Fatal(err)
		}
	}
	res, err := m.Reserve(ctx, ReserveRequest{OrderLine: "O1-1", Warehouse: "WH1", SKU: "SKU1", Qty: 2})
	if err != nil || res.StockVersion != 8 {
		t.Fatalf("reserve: %+v %v; want stock version 8", res, err)
	}
	rel, err := m.Release(ctx, res.ReservationID, ReleaseRequest{Reason: "order cancelled"})
	if err != nil || rel.StockVersion != 9 || rel.State != domain.Released {
		t.Fatalf("release: %+v %v; want released at version 9", rel, err)
	}
	av, rs, v := stock(t, e, "WH1", "SKU1")
	ledger := e.Count(t, "SELECT count(*) FROM inv_ledger")
	late, err := m.Confirm(ctx, res.ReservationID, ConfirmRequest{Receipt: "SHIP1", StockVersion: 8})
	if err != nil || late.Outcome != OutcomeConflict || late.ConflictID == 0 || late.State != domain.Released {
		t.Fatalf("late confirm: %+v %v; want a conflict at released", late, err)
	}
	av2, rs2, v2 := stock(t, e, "WH1", "SKU1")
	if av2 != av || rs2 != rs || v2 != v || v2 != 9 || e.Count(t, "SELECT count(*) FROM inv_ledger") != ledger {
		t.Fatalf("the late confirm changed the stock: %d/%d/%d → %d/%d/%d", av, rs, v, av2, rs2, v2)
	}
	c, err := m.st.GetConflict(ctx, e.DB, late.ConflictID)
	if err != nil || c.State != "open" || c.Kind != "confirm_after_released" {
		t.Fatalf("conflict %+v %v", c, err)
	}
	for _, want := range []string{`"SHIP1"`, `"stock_version":8`, `"Movement":"release"`} {
		if !strings.Contains(c.Evidence, want) {
			t.Errorf("evidence lacks %s: %s", want, c.Evidence)
		}
	}
	// The goods did leave (the warehouse shipped them): resolve with an
	// adjustment of -2, booked at version 10 with its reason.
	out, err := m.ResolveConflict(ctx, c.ID, ResolveRequest{Delta: -2, Reason: "shipped after the cancel: the goods left"})
	if err != nil || out.Adjustment.State != "applied" {
		t.Fatalf("resolve: %+v %v", out, err)
	}
	_, _, v3 := stock(t, e, "WH1", "SKU1")
	var mv, reason string
	var sv int64
	if err := e.DB.QueryRow(ctx, "SELECT movement, reason, stock_version FROM inv_ledger ORDER BY id DESC LIMIT 1").Scan(&mv, &reason, &sv); err != nil {
		t.Fatal(err)
	}
	if v3 != 10 || mv != "adjust" || sv != 10 || reason == "" {
		t.Fatalf("resolution booked %s %q at %d (stock %d); want an adjustment at 10", mv, reason, sv, v3)
	}
	c, _ = m.st.GetConflict(ctx, e.DB, c.ID)
	if c.State != "resolved" || c.AdjustmentID == 0 {
		t.Fatalf("conflict after resolution: %+v", c)
	}
}
