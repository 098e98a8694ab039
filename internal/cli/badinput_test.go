package cli_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/keelwork/keel/internal/cli"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/server"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/servertest"
)

// startServe runs `keel serve` in process on a fresh PostgreSQL schema
// with every module and returns the running server, an admin token and
// the schema's database.
func startServe(t *testing.T) (*server.Server, string, *sql.DB) {
	t.Helper()
	return startServeWith(t, nil)
}

// startServeWith is startServe with extra flags ("demo": "true").
func startServeWith(t *testing.T, extra map[string]string) (*server.Server, string, *sql.DB) {
	t.Helper()
	_, schema := testdb.OpenPostgres(t, &testdb.Options{Bare: true})
	dbURL := testdb.ServeURL(t, schema)
	flags := map[string]string{"database-url": dbURL, "schema": schema, "addr": "127.0.0.1:0",
		"cookie-secure": "false", "log-level": "error", "shutdown-timeout": "10s", "module-settings": testModuleSettings(t)}
	for k, v := range extra {
		flags[k] = v
	}
	o, err := cli.ResolveServe("", func(string) string { return "" }, flags)
	if err != nil {
		t.Fatal(err)
	}
	type running struct {
		srv   *server.Server
		store *auth.Store
	}
	ready := make(chan running, 1)
	o.Ready = func(srv *server.Server, store *auth.Store) { ready <- running{srv, store} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cli.Serve(ctx, o, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not shut down within 30s")
		}
	})
	var r running
	select {
	case r = <-ready:
	case err := <-done:
		t.Fatalf("serve ended before it was ready: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("serve not ready within 60s")
	}
	secret, _, err := r.store.CreateToken(ctx, "walker", auth.RoleAdmin, "test", "bad input walk")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", testdb.PostgresSchemaURL(t, schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return r.srv, secret, db
}

// apiCall sends one admin API request and decodes the JSON answer.
func apiCall(t *testing.T, h http.Handler, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req := httptest.NewRequest(method, "http://keel.test"+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	return rec.Code, out
}

func idOf(t *testing.T) func(int, map[string]any) string {
	return func(status int, out map[string]any) string { return fixtureID(t, status, out) }
}

func fixtureID(t *testing.T, status int, out map[string]any) string {
	t.Helper()
	if status >= 300 {
		t.Fatalf("creating a fixture: %d %v", status, out)
	}
	if r, ok := out["reservation"].(map[string]any); ok {
		out = r
	}
	switch v := out["id"].(type) {
	case float64:
		return strconv.FormatInt(int64(v), 10)
	case string:
		return v
	}
	t.Fatalf("creating a fixture: no id in %v", out)
	return ""
}

// volatileTables change by themselves while `keel serve` runs (leases,
// heartbeats, samples, the modules' presence and periodic work).
var volatileTables = []string{"keel_leader", "keel_client", "keel_instance", "keel_flow_key", "keel_job",
	"keel_periodic", "dlv_presence", "rsv_notification", "rsv_run", "keel_sample",
	// the events relay's leases and the buses' progress over events that
	// modules emitted before the walk
	"keel_events_relay_lease", "keel_events_relay_instance", "keel_events_outbox", "keel_events_archive",
	"keel_events_bus_message", "keel_events_bus_consumer", "keel_events_bus_delivery", "keel_events_consumer",
	"keel_events_inbox",
	// scheduled reconciliation runs (payment, inventory) and their audit
	// entries; a run an operator starts is a route the walk covers
	"keel_recon_run", "keel_audit WHERE action <> 'recon.run'"}

// moduleGoodBodies are well-formed bodies of the routes of the modules
// beyond delivery and reservation (inventory, alarm, tracking, payment,
// export), so that the walk spoils each of their fields, not only a
// reason. References they name do not exist (a warehouse, a channel, the
// 999999 of a path), so no good body of theirs is ever stored either.
func moduleGoodBodies(method, pattern, reason string) (map[string]any, bool) {
	if method != "POST" {
		return nil, false
	}
	b, ok := moduleBodies(reason)[pattern]
	return b, ok
}

func moduleBodies(reason string) map[string]map[string]any {
	from := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	bodies := map[string]map[string]any{
		"/api/v1/inventory/reservations":                      {"order_line": "WALK-1", "warehouse": "WH-WALK", "sku": "SKU-WALK", "qty": 1},
		"/api/v1/inventory/reservations/{id}/confirm":         {"receipt": "R-WALK", "stock_version": 1},
		"/api/v1/inventory/reservations/{id}/release":         {"reason": reason},
		"/api/v1/inventory/reservations/{id}/return":          {"reason": reason},
		"/api/v1/inventory/reservations/{id}/return-received": {"receipt": "R-WALK"},
		"/api/v1/inventory/receipts":                          {"receipt": "R-WALK", "warehouse": "WH-WALK", "sku": "SKU-WALK", "qty": 1},
		"/api/v1/inventory/warehouses":                        {"id": "WH-WALK", "name_zh": "走查仓", "name_en": "Walk"},
		"/api/v1/inventory/skus": {"id": "SKU-WALK", "name_zh": "走查", "name_en": "Walk", "unit_value_minor": 100,
			"currency": "CNY"},
		"/api/v1/inventory/adjustments": {"key": "adj-walk", "warehouse": "WH-WALK", "sku": "SKU-WALK", "delta": 1,
			"reason": reason},
		"/api/v1/inventory/conflicts/{id}/resolve": {"delta": 1, "reason": reason},
		"/api/v1/inventory/admission":              {"busy": true, "reason": reason},
		"/api/v1/alarm/instances/{id}/ack":         {"comment": reason},
		"/api/v1/alarm/silences": {"device": "dev-walk", "rule": "rule-walk", "starts_at": from.Format(time.RFC3339),
			"ends_at": from.Add(time.Hour).Format(time.RFC3339), "comment": reason},
		"/api/v1/alarm/devices":                                           {"id": "dev-walk", "name": "Walk device", "gateway": "gw-walk"},
		"/api/v1/alarm/storms/{id}/replay":                                {},
		"/api/v1/tracking/carriers/{carrier}/mappings":                    {"codes": map[string]any{"X1": "delivered"}, "note": reason},
		"/api/v1/tracking/carriers/{carrier}/mappings/{version}/activate": {"reason": reason},
		"/api/v1/payment/payments": {"payment_no": "P-WALK-1", "order_id": "O-WALK-1", "channel": "no-such-channel",
			"amount_minor": 100, "currency": "CNY"},
		"/api/v1/payment/payments/{no}/refunds": {"request_id": "RF-WALK-1", "amount_minor": 1, "reason": reason},
		"/api/v1/payment/bills":                 {"channel": "no-such-channel", "day": "2026-01-01"},
		"/api/v1/exports":                       {"tenant": "t-walk", "columns": []any{"id"}, "format": "csv"},
		"/api/v1/exports/{id}/cancel":           {"reason": reason},
		"/api/v1/exports/{id}/retry":            {"reason": reason},
	}
	return bodies
}

// TestModuleGoodBodiesNameRealRoutes keeps moduleGoodBodies honest: each
// pattern it names is a route of `keel serve`, so a renamed route cannot
// silently fall back to the walk's generic body.
func TestModuleGoodBodiesNameRealRoutes(t *testing.T) {
	t.Parallel()
	srv, _, _ := startServe(t)
	routes := map[string]bool{}
	_ = chi.Walk(srv.API().Router(), func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routes[method+" "+pattern] = true
		return nil
	})
	for p := range moduleBodies("r") {
		if !routes["POST "+p] {
			t.Errorf("moduleGoodBodies names %s, which is not a route", p)
		}
	}
	for r := range routes {
		method, pattern, _ := strings.Cut(r, " ")
		for _, mod := range []string{"/api/v1/inventory/", "/api/v1/alarm/", "/api/v1/payment/", "/api/v1/exports", "/api/v1/tracking/"} {
			if method == "POST" && strings.HasPrefix(pattern, mod) {
				if _, ok := moduleGoodBodies(method, pattern, "r"); !ok && !bodyless[pattern] {
					t.Errorf("%s has no good body: the walk would spoil only a reason", r)
				}
			}
		}
	}
}

// bodyless are module POST routes that take no body.
var bodyless = map[string]bool{
	"/api/v1/tracking/waybills/{carrier}/{waybill}/refresh":         true,
	"/api/v1/tracking/carriers/{carrier}/mappings/{version}/replay": true,
	"/api/v1/payment/payments/{no}/query":                           true,
}

// TestBadInputChangesNothing walks every route of `keel serve` with both
// modules, on real rows (an enterprise, an application, a resource, a
// slot, a reservation), sending the catalogue of bad input: each answer is
// a 4xx problem and no table changed.
func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	srv, token, db := startServe(t)
	h := srv.API()
	ent := idOf(t)(apiCall(t, h, token, "POST", "/admin/operations/delivery-enterprises", map[string]any{"name": "Acme"}))
	app := idOf(t)(apiCall(t, h, token, "POST", "/admin/operations/delivery-applications", map[string]any{
		"enterprise_id": json.Number(ent), "name": "app", "account": "c1", "secret": "s3cret", "protocol": "cmpp30", "rate": 5}))
	cat := idOf(t)(apiCall(t, h, token, "POST", "/api/v1/reservation/categories", map[string]any{"id": "room",
		"name_zh": "会议室", "name_en": "Rooms", "grace_minutes": 15, "release_mode": "dry_run", "hold_minutes": 5, "reminder_minutes": 30, "appeal_minutes": 60, "reason": "walk fixture"}))
	res := idOf(t)(apiCall(t, h, token, "POST", "/api/v1/reservation/resources", map[string]any{"category_id": cat, "name": "Room 1", "location": "L1"}))
	start := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Hour)
	slot := idOf(t)(apiCall(t, h, token, "POST", "/api/v1/reservation/slots", map[string]any{"resource_id": json.Number(res),
		"starts_at": start, "ends_at": start.Add(time.Hour), "capacity": 3}))
	rsv := idOf(t)(apiCall(t, h, token, "POST", "/api/v1/reservation/reservations", map[string]any{"slot_id": json.Number(slot), "user_id": "u1"}))
	digest := servertest.Digest(t, db, "postgres", volatileTables...)
	reason := "a good reason"
	n := servertest.WalkBadInput(t, h, token, digest, func(method, pattern string) servertest.Good {
		g := servertest.Good{Params: map[string]string{"id": "1", "name": "default", "key": "k1", "user": "u1"},
			Body: map[string]any{"reason": reason}}
		switch {
		case strings.HasPrefix(pattern, "/admin/operations/delivery-applications"):
			g.Params = map[string]string{"id": app}
			if method == "PATCH" {
				g.Body = map[string]any{"rate": 7, "push_url": "http://127.0.0.1:1/push"}
			} else {
				g.Body = map[string]any{"enterprise_id": 999999, "name": "app2", "account": "c2", "secret": "s", "protocol": "cmpp30", "rate": 5}
			}
		case strings.HasPrefix(pattern, "/admin/operations/delivery-enterprises"):
			g.Body = map[string]any{"name": "Other"}
		case strings.HasSuffix(pattern, "/downstream-requeue-tasks/preview"):
			g.Body = map[string]any{"app_id": 999999, "keyword": "x", "status": "failed"}
		case strings.HasSuffix(pattern, "/downstream-requeue-tasks"):
			g.Body = map[string]any{"token": "not-a-token", "reason": reason, "rate": 5, "auto_pause": 3, "name": "n"}
		case strings.HasSuffix(pattern, "/downstream-deliveries/requeue"):
			g.Body = map[string]any{"ids": []any{999999}, "reason": reason}
		case strings.HasPrefix(pattern, "/admin/operations/downstream-deliveries/"):
			g.Params = map[string]string{"id": "999999"}
			g.Body = map[string]any{"reason": reason, "version": 1}
		case strings.HasSuffix(pattern, "/reservation/resources"):
			g.Body = map[string]any{"category_id": "no-such-category", "name": "Room 2", "location": "L2"}
		case strings.HasSuffix(pattern, "/reservation/slots") && method == "POST":
			g.Body = map[string]any{"resource_id": 999999, "starts_at": start.Format(time.RFC3339),
				"ends_at": start.Add(time.Hour).Format(time.RFC3339), "capacity": 2}
		case strings.HasPrefix(pattern, "/api/v1/reservation/slots/"):
			g.Params = map[string]string{"id": slot}
			g.Body = map[string]any{"user_id": "u3"}
		case strings.HasSuffix(pattern, "/reservation/reservations") && method == "POST":
			g.Body = map[string]any{"slot_id": 999999, "user_id": "u2"}
		case strings.HasPrefix(pattern, "/api/v1/reservation/reservations/"):
			g.Params = map[string]string{"id": rsv}
			g.Body = map[string]any{"reason": reason, "version": 999}
		case strings.HasPrefix(pattern, "/api/v1/reservation/categories"):
			g.Params = map[string]string{"id": cat}
			g.Body = map[string]any{"reason": reason, "version": 999, "name_zh": "会议室", "name_en": "Rooms",
				"grace_minutes": 15, "release_mode": "dry_run", "hold_minutes": 5}
		case strings.HasSuffix(pattern, "/reservation/policy"):
			g.Body = map[string]any{"enabled": true, "threshold": 3, "window_days": 30, "restrict_days": 7, "version": 999, "reason": reason}
		default:
			if b, ok := moduleGoodBodies(method, pattern, reason); ok {
				g.Body = b
			}
		}
		return g
	})
	t.Logf("sent %d bad requests", n)
}
