package inventory

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keelsql"
)

// TestInventoryProjectionMonotonic: versions 43 then 42 leave the
// projection at 43 with 42 recorded as stale; a skipped version is marked
// and refetched from the ledger. Then the whole pipeline (outbox, relay,
// bus, inbox) brings the projection to the stock's version and gives one
// pick task per confirmed reservation.
func TestInventoryProjectionMonotonic(t *testing.T) {
	each(t, testProjection[pgx.Tx], testProjection[*sql.Tx])
}

// eventAt rebuilds the event of a pair's ledger row at version v, as the
// outbox stored it.
func eventAt[TTx any](t *testing.T, e *tenv[TTx], wh, sku string, v int64) StockEvent {
	t.Helper()
	var payload string
	err := e.DB.QueryRow(context.Background(), `SELECT o.payload FROM keel_events_outbox o JOIN inv_ledger l
		ON o.event_id = CAST(l.id AS TEXT) WHERE l.warehouse_id = $1 AND l.sku_id = $2 AND l.stock_version = $3`, wh, sku, v).Scan(&payload)
	if err != nil {
		t.Fatalf("event at %d: %v", v, err)
	}
	var ev StockEvent
	if err := json.Unmarshal([]byte(payload), &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func testProjection[TTx any](t *testing.T, e *tenv[TTx]) {
	ctx := context.Background()
	m := e.build(t, nil)
	seed(t, m, "WH1", "SKU1", 0)
	for i := range 45 {
		if _, err := m.Receive(ctx, fmt.Sprintf("GR%d", i), "WH1", "SKU1", 1); err != nil {
			t.Fatal(err)
		}
	}
	apply := func(v int64) {
		t.Helper()
		ev := eventAt(t, e, "WH1", "SKU1", v)
		if err := e.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error { return m.applySearch(ctx, tx, ev) }); err != nil {
			t.Fatal(err)
		}
	}
	projected := func() (v, av int64) {
		t.Helper()
		if err := e.DB.QueryRow(ctx, "SELECT version, available FROM inv_search WHERE warehouse_id = 'WH1' AND sku_id = 'SKU1'").Scan(&v, &av); err != nil {
			t.Fatal(err)
		}
		return
	}
	apply(43)
	apply(42)
	if v, av := projected(); v != 43 || av != 43 {
		t.Fatalf("projection at %d (available %d) after 43 then 42; want 43", v, av)
	}
	if n := e.Count(t, "SELECT count(*) FROM inv_search_stale WHERE version = 42 AND current = 43"); n != 1 {
		t.Fatalf("stale 42 recorded %d times; want once", n)
	}
	// 43's own gap (1..42 never seen) was refetched from the ledger.
	if n := e.Count(t, "SELECT count(*) FROM inv_search_gap WHERE version < 43 AND ledger_id IS NOT NULL"); n != 42 {
		t.Fatalf("%d refetched versions below 43; want 42", n)
	}
	apply(45) // 44 is missing
	if v, av := projected(); v != 45 || av != 45 {
		t.Fatalf("projection at %d/%d after 45; want 45", v, av)
	}
	var gapLedger, ledger44 int64
	if err := e.DB.QueryRow(ctx, "SELECT ledger_id FROM inv_search_gap WHERE version = 44").Scan(&gapLedger); err != nil {
		t.Fatalf("gap 44 not marked: %v", err)
	}
	if err := e.DB.QueryRow(ctx, "SELECT id FROM inv_ledger WHERE stock_version = 44").Scan(&ledger44); err != nil {
		t.Fatal(err)
	}
	if gapLedger != ledger44 {
		t.Fatalf("gap 44 refetched ledger %d; want %d", gapLedger, ledger44)
	}
	apply(44) // arriving late: stale, no effect
	if v, _ := projected(); v != 45 {
		t.Fatalf("projection went back to %d", v)
	}

	// The pipeline: reservations, confirmations and releases on two pairs.
	seed(t, m, "WH1", "SKU2", 20)
	e.start(t)
	var confirmed int64
	for i := range 10 {
		sku := []string{"SKU1", "SKU2"}[i%2]
		r, err := m.Reserve(ctx, ReserveRequest{OrderLine: fmt.Sprintf("P%d-1", i), Warehouse: "WH1", SKU: sku, Qty: 2})
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			_, err = m.Release(ctx, r.ReservationID, ReleaseRequest{Reason: "cancel"})
		} else {
			_, err = m.Confirm(ctx, r.ReservationID, ConfirmRequest{Receipt: fmt.Sprintf("S%d", i), StockVersion: r.StockVersion})
			confirmed++
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the projection to catch up", func() bool {
		return e.Count(t, `SELECT count(*) FROM inv_stock s JOIN inv_search p ON p.warehouse_id = s.warehouse_id
			AND p.sku_id = s.sku_id AND p.version = s.version AND p.available = s.available`) == 2
	})
	eventually(t, "one pick task per confirmed reservation", func() bool {
		return e.Count(t, "SELECT count(*) FROM inv_pick_task") == confirmed
	})
	if n := e.Count(t, "SELECT count(DISTINCT reservation_id) FROM inv_pick_task"); n != confirmed {
		t.Fatalf("%d distinct pick tasks; want %d", n, confirmed)
	}
	eventually(t, "statistics", func() bool {
		return e.Count(t, "SELECT COALESCE(sum(events), 0) FROM inv_stats WHERE movement = 'reserve'") == 10
	})
}
