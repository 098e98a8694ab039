package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/migration"
)

// TestAPIRoles serves the module's API through Keel's server: every path
// operators' tools call exists at its absolute path; reads need a viewer, changes an
// operator; without a token nothing is served; the operator's token is the
// actor of the preview and the creation, so a preview cannot be redeemed
// by someone else.
func TestAPIRoles(t *testing.T) {
	t.Parallel()
	d, _ := testdb.OpenPostgres(t, &testdb.Options{Lines: func(dialect string) []keelmigrate.Line {
		return append(migration.Lines(dialect), Lines(dialect)...)
	}})
	e := &env[pgx.Tx]{t: t, d: d, pg: d, db: keelsql.Pgx(d.Pool())}
	i := e.start(testSettings("cmpp_addr", "off"))
	ent := e.enterprise(i, "Acme")
	a := e.app(i, ent, "api", "c100", ProtoCMPP30, "")
	for k := range 3 {
		e.seed(i, a, StatusFailed, time.Now().Add(-time.Minute), "1380000000"+itoa(int64(k)))
	}
	srv := browsertest.Serve(t, d.Pool(), e.db, i.c, i.m)
	tokens := map[string]string{}
	for name, role := range map[string]auth.Role{"viewer": auth.RoleViewer, "operator": auth.RoleOperator, "other": auth.RoleOperator, "admin": auth.RoleAdmin} {
		tokens[name] = srv.Token(name, role)
	}
	call := func(who, method, path string, body any) (int, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, srv.Base+path, rd)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if who != "" {
			req.Header.Set("Authorization", "Bearer "+tokens[who])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	if s, _ := call("", "GET", PathDeliveries, nil); s != http.StatusUnauthorized {
		t.Fatalf("anonymous list: %d", s)
	}
	if s, out := call("viewer", "GET", PathDeliveries+"?size=25&status=failed", nil); s != 200 || out["total"] != float64(3) {
		t.Fatalf("viewer list: %d %v", s, out)
	}
	if s, _ := call("viewer", "POST", PathTasks+"/preview", map[string]any{}); s != http.StatusForbidden {
		t.Fatalf("viewer preview: %d", s)
	}
	s, pv := call("operator", "POST", PathTasks+"/preview", map[string]any{"app_id": a.ID})
	if s != 200 || pv["eligible"] != float64(3) || pv["token"] == "" {
		t.Fatalf("operator preview: %d %v", s, pv)
	}
	create := map[string]any{"token": pv["token"], "reason": "API role check", "rate": 1}
	if s, out := call("other", "POST", PathTasks, create); s != http.StatusForbidden || out["code"] != "preview_of_other_operator" {
		t.Fatalf("another operator redeemed the preview: %d %v", s, out)
	}
	s, task := call("operator", "POST", PathTasks, create)
	if s != http.StatusCreated || task["state_label"] == "" {
		t.Fatalf("create: %d %v", s, task)
	}
	id := itoa(int64(task["id"].(float64)))
	for _, p := range []string{PathTasks, PathTasks + "/" + id, PathTasks + "/" + id + "/items", PathApps} {
		if s, out := call("viewer", "GET", p, nil); s != 200 {
			t.Fatalf("GET %s: %d %v", p, s, out)
		}
	}
	for _, action := range []string{"pause", "resume", "terminate"} {
		if s, _ := call("viewer", "POST", PathTasks+"/"+id+"/"+action, map[string]string{"reason": "role check"}); s != http.StatusForbidden {
			t.Fatalf("viewer %s: %d", action, s)
		}
		if s, out := call("operator", "POST", PathTasks+"/"+id+"/"+action, map[string]string{"reason": "role check"}); s != 200 {
			t.Fatalf("operator %s: %d %v", action, s, out)
		}
	}
	if s, out := call("operator", "POST", PathTasks+"/"+id+"/resume", map[string]string{"reason": "too late now"}); s != http.StatusConflict {
		t.Fatalf("resume of a terminated task: %d %v", s, out)
	}
	if s, out := call("operator", "POST", PathDeliveries+"/requeue", map[string]any{"ids": []int64{1, 2}, "reason": "page requeue"}); s != 200 {
		t.Fatalf("page requeue: %d %v", s, out)
	}
	if s, out := call("operator", "POST", PathDeliveries+"/3/requeue", map[string]any{"reason": "x"}); s != http.StatusBadRequest {
		t.Fatalf("short reason: %d %v", s, out)
	}

	// Customers are an administrator's business, and audited.
	newApp := map[string]any{"enterprise_id": ent, "name": "api-http", "account": "api-h", "secret": "s3cr3t",
		"protocol": "http", "push_url": "http://127.0.0.1:9/x", "report_enabled": true}
	if s, _ := call("operator", "POST", PathApps, newApp); s != http.StatusForbidden {
		t.Fatalf("operator creating an application: %d", s)
	}
	s, created := call("admin", "POST", PathApps, newApp)
	if s != http.StatusCreated || created["protocol"] != "http" || created["rate"] != float64(DefaultAppRate) {
		t.Fatalf("create application: %d %v", s, created)
	}
	appID := itoa(int64(created["id"].(float64)))
	if s, out := call("admin", "PATCH", PathApps+"/"+appID, map[string]any{"enabled": false}); s != 200 || out["status"] != "disabled" {
		t.Fatalf("disable application: %d %v", s, out)
	}
	if s, out := call("admin", "POST", PathApps, map[string]any{"enterprise_id": ent, "name": "bad", "account": "toolong7",
		"secret": "x", "protocol": "cmpp30"}); s != http.StatusBadRequest {
		t.Fatalf("a 7-character CMPP account: %d %v", s, out)
	}
	if l, err := i.c.AuditList(context.Background(), &keel.AuditListParams{Action: "delivery.app_"}); err != nil || len(l) < 3 {
		t.Fatalf("application audits: %v %d", err, len(l))
	}
}
