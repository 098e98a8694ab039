package eventsweb_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/eventsweb"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelrecon/recontest"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/server"
	"github.com/keelwork/keel/server/api"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/migration"
)

// served is Keel's real server hosting the events surface, with the test
// ledger reconciler registered and tokens for two operators and a viewer.
type served struct {
	t      *testing.T
	base   string
	tokens map[string]string // alice, bob (operators), vera (viewer)
	// roles holds a token per role (for the authorization walk); api is
	// the server's API handler.
	roles map[auth.Role]string
	api   *api.Handler
	// seed writes a payment into ours or theirs.
	ours, theirs func(key string, amount int64, status string)
	fixes        func(actionID string) int
	audits       func(action string) int
	count        func(q string) int
	exec         func(q string)
	// feed emits the events fixture: see startEvents.
	feed *eventFeed
}

var lines = &testdb.Options{Lines: func(dialect string) []keelmigrate.Line {
	return append(append(migration.Lines(dialect), keelrecon.Lines(dialect)...), keelevents.Line(dialect))
}}

// each runs f on PostgreSQL and SQLite.
func each(t *testing.T, f func(t *testing.T, s *served)) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		d, _ := testdb.OpenPostgres(t, lines)
		db := stdlib.OpenDBFromPool(d.Pool())
		t.Cleanup(func() { _ = db.Close() })
		f(t, serve(t, d, db, keelsql.Pgx(d.Pool())))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		f(t, serveSQLite(t))
	})
}

func serveSQLite(t *testing.T) *served {
	d, _ := testdb.OpenSQLite(t, lines)
	return serve(t, d, d.DB(), keelsql.SQLite(d.DB()))
}

func serve[TTx any](t *testing.T, d keeldriver.Driver[TTx], db *sql.DB, mdb keelsql.DB[TTx]) *served {
	t.Helper()
	ctx := context.Background()
	client, err := keel.NewClient(d, &keel.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := keelrecon.New(mdb, &keelrecon.Config{ApproveAbove: map[string]int64{"": 10_000}})
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := recontest.NewLedger(ctx, mdb)
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Register(ledger); err != nil {
		t.Fatal(err)
	}
	if err := rc.Start(ctx, client); err != nil {
		t.Fatal(err)
	}
	ev, feed := startEvents(t, mdb, client)
	ew, err := eventsweb.New(&eventsweb.Config[TTx]{Recon: rc, Events: ev})
	if err != nil {
		t.Fatal(err)
	}
	store := auth.NewStore(db, d.Dialect(), auth.AuditedTxOf(mdb, client))
	srv, err := server.New(&server.Config{Addr: "127.0.0.1:0", Engine: client, Auth: store,
		Logger: slog.New(slog.DiscardHandler), Modules: []module.Web{ew}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	s := &served{t: t, base: srv.URL(), tokens: map[string]string{}, feed: feed, roles: map[auth.Role]string{}, api: srv.API()}
	for name, role := range map[string]auth.Role{"alice": auth.RoleOperator, "bob": auth.RoleOperator, "vera": auth.RoleViewer} {
		secret, _, err := store.CreateToken(ctx, name, role, "test", "events surface fixture")
		if err != nil {
			t.Fatal(err)
		}
		s.tokens[name] = secret
	}
	for _, role := range []auth.Role{auth.RoleViewer, auth.RoleOperator, auth.RoleAdmin} {
		secret, _, err := store.CreateToken(ctx, "walk-"+role.String(), role, "test", "authorization walk")
		if err != nil {
			t.Fatal(err)
		}
		s.roles[role] = secret
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	s.ours = func(k string, a int64, st string) { must(ledger.Ours(ctx, k, a, st)) }
	s.theirs = func(k string, a int64, st string) { must(ledger.Theirs(ctx, k, a, st)) }
	s.fixes = func(id string) int {
		n, err := ledger.Fixes(ctx, id)
		must(err)
		return n
	}
	s.audits = func(action string) int {
		list, err := client.AuditList(ctx, &keel.AuditListParams{Action: action, Limit: 1000})
		must(err)
		n := 0
		for _, a := range list {
			if a.Action == action {
				n++
			}
		}
		return n
	}
	s.count = func(q string) int {
		var n int
		must(mdb.QueryRow(ctx, q).Scan(&n))
		return n
	}
	s.exec = func(q string) {
		_, err := mdb.Exec(ctx, q)
		must(err)
	}
	return s
}

// seed gives the ledger reconciler one discrepancy of each class it finds.
func (s *served) seed() {
	s.theirs("p-missing", 5_000, "paid")
	s.ours("p-extra", 2_000, "paid")
	s.ours("p-amount", 10_000, "paid")
	s.theirs("p-amount", 60_000, "paid")
	s.ours("p-status", 3_000, "pending")
	s.theirs("p-status", 3_000, "paid")
	s.ours("p-ok", 1_000, "paid")
	s.theirs("p-ok", 1_000, "paid")
}

// call sends a JSON request as user and decodes the answer into out (if
// not nil); it returns the status and the raw body.
func (s *served) call(user, method, path string, body any, out any) (int, []byte) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = bytes.NewReader([]byte(b))
		default:
			raw, _ := json.Marshal(b)
			rd = bytes.NewReader(raw)
		}
	}
	req, _ := http.NewRequest(method, s.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+s.tokens[user])
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			s.t.Fatalf("%s %s: %v\n%s", method, path, err, raw)
		}
	}
	return resp.StatusCode, raw
}

// problemCode reads a problem document's code.
func problemCode(raw []byte) string {
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(raw, &p)
	return p.Code
}
