package inventory

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module/web"
)

// serveAPI mounts the module's routes as the server does: absolute
// patterns, the actor on the context, JSON bodies, problem documents.
func serveAPI[TTx any](t *testing.T, m *Module[TTx], actor string) *httptest.Server {
	mux := http.NewServeMux()
	for _, rt := range m.Routes() {
		handle := rt.Handle
		mux.HandleFunc(rt.Pattern, func(w http.ResponseWriter, r *http.Request) {
			r = r.WithContext(keel.WithActor(r.Context(), actor))
			status, body, err := handle(w, r)
			if err != nil {
				status, code := http.StatusInternalServerError, web.CodeInternal
				if p, ok := web.As(err); ok {
					status, code = p.Status, p.Code
				}
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(status)
				_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "code": code, "detail": err.Error()})
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(body)
		})
	}
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
}

func call(t *testing.T, s *httptest.Server, method, path string, body any) reply {
	t.Helper()
	var rd *bytes.Reader
	if s, ok := body.(string); ok {
		rd = bytes.NewReader([]byte(s))
	} else {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.URL+path, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := reply{status: resp.StatusCode, header: resp.Header, body: map[string]any{}}
	_ = json.NewDecoder(resp.Body).Decode(&out.body)
	return out
}

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
	api := serveAPI(t, m, "op")
	// Counted before the first reservation (which writes one row to each):
	// the window of the watermark is 2 s, and counting between the two
	// requests on a loaded machine could outlast it.
	tables := []string{"inv_reservation", "inv_ledger", "inv_action", "keel_events_outbox"}
	before := map[string]int64{}
	for _, tb := range tables {
		before[tb] = count(t, e, "SELECT count(*) FROM "+tb)
	}
	first := call(t, api, "POST", "/api/v1/inventory/reservations", map[string]any{"order_line": "A1-1", "warehouse": "WH1", "sku": "SKU1", "qty": 2})
	if first.status != http.StatusOK {
		t.Fatalf("first reservation: %d %v", first.status, first.body)
	}
	if !m.Admission().Over {
		t.Fatalf("admission %+v; want over the watermark", m.Admission())
	}
	busy := call(t, api, "POST", "/api/v1/inventory/reservations", map[string]any{"order_line": "A2-1", "warehouse": "WH1", "sku": "SKU1", "qty": 1})
	if busy.status != http.StatusTooManyRequests || busy.body["code"] != CodeBusy || busy.header.Get("Retry-After") != "3" {
		t.Fatalf("over the watermark: %d %v Retry-After %q; want 429 %s with Retry-After 3", busy.status, busy.body, busy.header.Get("Retry-After"), CodeBusy)
	}
	for _, tb := range tables {
		if n := count(t, e, "SELECT count(*) FROM "+tb); n != before[tb]+1 {
			t.Fatalf("%s holds %d rows more after the admitted and the refused reservation; want 1 (the refused one wrote nothing)", tb, n-before[tb])
		}
	}
	// Held over while the consumers are watched: on a loaded machine the
	// first low-value delivery can come after the 2 s window has let the one
	// slow sample go, and then nothing pauses.
	setWindow(m, time.Hour)
	// Confirmations keep their share.
	id := int64(first.body["reservation_id"].(float64))
	conf := call(t, api, "POST", "/api/v1/inventory/reservations/"+itoa(id)+"/confirm", map[string]any{"receipt": "S1", "stock_version": 2})
	if conf.status != http.StatusOK {
		t.Fatalf("confirm over the watermark: %d %v", conf.status, conf.body)
	}
	eventually(t, "fulfilment to pick while the others pause", func() bool {
		return count(t, e, "SELECT count(*) FROM inv_pick_task") == 1 && m.pausedDeliveries.Load() > 0
	})
	if n := count(t, e, "SELECT count(*) FROM inv_stats WHERE movement = 'confirm'"); n != 0 && m.Admission().Over {
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
		return count(t, e, "SELECT COALESCE(sum(events), 0) FROM inv_stats") == 4 // receive, 2 reserves, confirm
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
	rel := call(t, api, "POST", "/api/v1/inventory/reservations/"+itoa(third.ReservationID)+"/release", map[string]any{"reason": "customer cancelled"})
	if rel.status != http.StatusOK || rel.body["state"] != "released" {
		t.Fatalf("release over the watermark: %d %v", rel.status, rel.body)
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
	api := serveAPI(t, m, "op")
	tables := []string{"inv_reservation", "inv_ledger", "inv_action", "inv_adjustment", "keel_events_outbox"}
	before := map[string]int64{}
	for _, tb := range tables {
		before[tb] = count(t, e, "SELECT count(*) FROM "+tb)
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
		got := call(t, api, c.method, c.path, c.body)
		if got.status != c.status || got.body["code"] != c.code {
			t.Errorf("%s %s %v: %d %v; want %d %s", c.method, c.path, c.body, got.status, got.body, c.status, c.code)
		}
	}
	for _, tb := range tables {
		if n := count(t, e, "SELECT count(*) FROM "+tb); n != before[tb] {
			t.Errorf("bad input wrote %d rows to %s", n-before[tb], tb)
		}
	}
}
