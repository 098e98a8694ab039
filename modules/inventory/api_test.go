package inventory

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/module/web"
)

// TestInventoryAdmission: over the watermark (reservation latency above
// its budget) a new reservation gets 429 with Retry-After and nothing is
// written; confirmations still go through and fulfilment keeps consuming
// while statistics and the search projection pause; once the window has
// no slow requests, reservations are admitted again and the paused
// consumers catch up.
func TestInventoryAdmission(t *testing.T) {
	each(t, testAdmission[pgx.Tx], testAdmission[*sql.Tx])
}

func testAdmission[TTx any](t *testing.T, e *tenv[TTx]) {
	ctx := context.Background()
	// A budget no real reservation meets: the first one measured puts the
	// inventory over its watermark.
	m := e.build(t, nil, WithSettings(func(s *Settings) { s.LatencyBudget = time.Nanosecond; s.RetryAfter = 3 * time.Second }))
	seed(t, m, "WH1", "SKU1", 10)
	e.start(t)
	api := moduletest.ServeAPI(t, m.Routes(), "op")
	// Counted before the first reservation (which writes one row to each):
	// the window of the watermark is 2 s, and counting between the two
	// requests on a loaded machine could outlast it.
	tables := []string{"inv_reservation", "inv_ledger", "inv_action", "keel_events_outbox"}
	before := map[string]int64{}
	for _, tb := range tables {
		before[tb] = e.Count(t, "SELECT count(*) FROM "+tb)
	}
	first := moduletest.Do(t, api.URL, "POST", "/api/v1/inventory/reservations", map[string]any{"order_line": "A1-1", "warehouse": "WH1", "sku": "SKU1", "qty": 2}, nil)
	if first.Status != http.StatusOK {
		t.Fatalf("first reservation: %d %v", first.Status, first.Body)
	}
	if !m.Admission().Over {
		t.Fatalf("admission %+v; want over the watermark", m.Admission())
	}
	busy := moduletest.Do(t, api.URL, "POST", "/api/v1/inventory/reservations", map[string]any{"order_line": "A2-1", "warehouse": "WH1", "sku": "SKU1", "qty": 1}, nil)
	if busy.Status != http.StatusTooManyRequests || busy.Body["code"] != CodeBusy || busy.Header.Get("Retry-After") != "3" {
		t.Fatalf("over the watermark: %d %v Retry-After %q; want 429 %s with Retry-After 3", busy.Status, busy.Body, busy.Header.Get("Retry-After"), CodeBusy)
	}
	for _, tb := range tables {
		if n := e.Count(t, "SELECT count(*) FROM "+tb); n != before[tb]+1 {
			t.Fatalf("%s holds %d rows more after the admitted and the refused reservation; want 1 (the refused one wrote nothing)", tb, n-before[tb])
		}
	}
	// Held over while the consumers are watched: on a loaded machine the
	// first low-value delivery can come after the 2 s window has let the one
	// slow sample go, and then nothing pauses.
	setWindow(m, time.Hour)
	// Confirmations keep their share.
	id := int64(first.Body["reservation_id"].(float64))
	conf := moduletest.Do(t, api.URL, "POST", "/api/v1/inventory/reservations/"+itoa(id)+"/confirm", map[string]any{"receipt": "S1", "stock_version": 2}, nil)
	if conf.Status != http.StatusOK {
		t.Fatalf("confirm over the watermark: %d %v", conf.Status, conf.Body)
	}
	eventually(t, "fulfilment to pick while the others pause", func() bool {
		return e.Count(t, "SELECT count(*) FROM inv_pick_task") == 1 && m.pausedDeliveries.Load() > 0
	})
	if n := e.Count(t, "SELECT count(*) FROM inv_stats WHERE movement = 'confirm'"); n != 0 && m.Admission().Over {
		t.Fatalf("statistics consumed while paused")
	}
	// No slow request in the window: admitted again, and the paused
	// consumers catch up.
	setWindow(m, 2*time.Second)
	eventually(t, "the watermark to clear", func() bool { return !m.Admission().Over })
	third, err := m.Reserve(ctx, ReserveRequest{OrderLine: "A3-1", Warehouse: "WH1", SKU: "SKU1", Qty: 1})
	if err != nil {
		t.Fatalf("after the window: %v", err)
	}
	m.adm.latencyBudget = time.Hour // keep it clear now
	eventually(t, "statistics to catch up", func() bool {
		return e.Count(t, "SELECT COALESCE(sum(events), 0) FROM inv_stats") == 4 // receive, 2 reserves, confirm
	})
	// An operator's switch refuses the same way.
	if err := m.SetBusy(keel.WithActor(ctx, "op"), true, "ahead of the sale"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Reserve(ctx, ReserveRequest{OrderLine: "A4-1", Warehouse: "WH1", SKU: "SKU1", Qty: 1}); !errors.Is(err, ErrBusy) {
		t.Fatalf("forced busy: %v", err)
	}
	// Releases keep their share too: the stock comes back while new
	// reservations are refused.
	rel := moduletest.Do(t, api.URL, "POST", "/api/v1/inventory/reservations/"+itoa(third.ReservationID)+"/release", map[string]any{"reason": "customer cancelled"}, nil)
	if rel.Status != http.StatusOK || rel.Body["state"] != "released" {
		t.Fatalf("release over the watermark: %d %v", rel.Status, rel.Body)
	}
	if av, _, _ := stock(t, e, "WH1", "SKU1"); av != 8 {
		t.Fatalf("available %d after the release over the watermark; want 8 (10 received, 2 confirmed)", av)
	}
}

func setWindow[TTx any](m *Module[TTx], w time.Duration) {
	m.adm.mu.Lock()
	m.adm.window = w
	m.adm.mu.Unlock()
}

func itoa(n int64) string { return jsonNumber(n) }

func jsonNumber(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestInventoryBadInput: zero, negative and absurd quantities, unknown SKU
// or warehouse and malformed keys are problem documents with stable codes,
// and nothing is written.
func TestInventoryBadInput(t *testing.T) {
	each(t, testBadInput[pgx.Tx], testBadInput[*sql.Tx])
}

func testBadInput[TTx any](t *testing.T, e *tenv[TTx]) {
	m := e.build(t, nil)
	seed(t, m, "WH1", "SKU1", 10)
	api := moduletest.ServeAPI(t, m.Routes(), "op")
	tables := []string{"inv_reservation", "inv_ledger", "inv_action", "inv_adjustment", "keel_events_outbox"}
	before := map[string]int64{}
	for _, tb := range tables {
		before[tb] = e.Count(t, "SELECT count(*) FROM "+tb)
	}
	res := "/api/v1/inventory/reservations"
	for _, c := range []struct {
		method, path string
		body         any
		status       int
		code         string
	}{
		{"POST", res, map[string]any{"order_line": "B1-1", "warehouse": "WH1", "sku": "SKU1", "qty": 0}, 400, web.CodeInvalidArgument},
		{"POST", res, map[string]any{"order_line": "B1-1", "warehouse": "WH1", "sku": "SKU1", "qty": -1}, 400, web.CodeInvalidArgument},
		{"POST", res, map[string]any{"order_line": "B1-1", "warehouse": "WH1", "sku": "SKU1", "qty": 1e12}, 400, web.CodeInvalidArgument},
		{"POST", res, map[string]any{"order_line": "B1-1", "warehouse": "WH1", "sku": "SKU1", "qty": 1.5}, 400, web.CodeInvalidArgument},
		{"POST", res, map[string]any{"order_line": "B1-1", "warehouse": "WH1", "sku": "NOPE", "qty": 1}, 400, CodeUnknownSKU},
		{"POST", res, map[string]any{"order_line": "B1-1", "warehouse": "WH9", "sku": "SKU1", "qty": 1}, 400, CodeUnknownWH},
		{"POST", res, map[string]any{"order_line": "has space", "warehouse": "WH1", "sku": "SKU1", "qty": 1}, 400, web.CodeInvalidArgument},
		{"POST", res, map[string]any{"order_line": "", "warehouse": "WH1", "sku": "SKU1", "qty": 1}, 400, web.CodeInvalidArgument},
		{"POST", res, map[string]any{"order_line": "B1-1", "warehouse": "WH1", "sku": "SKU1", "qty": 1, "extra": 1}, 400, web.CodeUnknownField},
		{"POST", res, `{"order_line": "B1-1"`, 400, web.CodeInvalidJSON},
		{"POST", res + "/abc/confirm", map[string]any{"receipt": "R", "stock_version": 1}, 400, web.CodeInvalidArgument},
		{"POST", res + "/999/confirm", map[string]any{"receipt": "R", "stock_version": 1}, 404, web.CodeNotFound},
		{"POST", res + "/1/confirm", map[string]any{"receipt": "bad receipt!", "stock_version": 1}, 400, web.CodeInvalidArgument},
		{"POST", "/api/v1/inventory/adjustments", map[string]any{"key": "k1", "warehouse": "WH1", "sku": "SKU1", "delta": 0, "reason": "count"}, 400, web.CodeInvalidArgument},
		{"POST", "/api/v1/inventory/adjustments", map[string]any{"key": "k1", "warehouse": "WH1", "sku": "SKU1", "delta": -50, "reason": "count"}, 409, CodeInvalidState},
		{"POST", "/api/v1/inventory/adjustments", map[string]any{"key": "k1", "warehouse": "WH1", "sku": "SKU1", "delta": 5, "reason": ""}, 400, web.CodeInvalidArgument},
		{"GET", res + "?limit=0", nil, 400, web.CodeInvalidArgument},
		{"GET", res + "?bogus=1", nil, 400, web.CodeInvalidArgument},
	} {
		got := moduletest.Do(t, api.URL, c.method, c.path, c.body, nil)
		if got.Status != c.status || got.Body["code"] != c.code {
			t.Errorf("%s %s %v: %d %v; want %d %s", c.method, c.path, c.body, got.Status, got.Body, c.status, c.code)
		}
	}
	for _, tb := range tables {
		if n := e.Count(t, "SELECT count(*) FROM "+tb); n != before[tb] {
			t.Errorf("bad input wrote %d rows to %s", n-before[tb], tb)
		}
	}
}
