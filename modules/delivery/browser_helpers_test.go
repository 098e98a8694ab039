package delivery

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/server"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/migration"
)

// newServedEnv is a PostgreSQL schema with the server's lines (tokens,
// sessions) and the delivery line migrated.
func newServedEnv(t *testing.T) *env[pgx.Tx] {
	t.Helper()
	d, schema := testdb.OpenPostgres(t, &testdb.Options{Lines: func(dialect string) []keelmigrate.Line {
		return append(migration.Lines(dialect), Lines(dialect)...)
	}})
	return &env[pgx.Tx]{t: t, d: d, pg: d, schema: schema, db: keelsql.Pgx(d.Pool())}
}

// serve starts Keel's real server (API, console, login) hosting the
// instance's module, and returns its base URL with a token of the given
// name and role for logging in.
func (e *env[TTx]) serve(i *inst[TTx], tokenName string, role auth.Role) (base, token string) {
	e.t.Helper()
	db := stdlib.OpenDBFromPool(e.pg.Pool())
	e.t.Cleanup(func() { _ = db.Close() })
	store := auth.NewStore(db, "postgres", auth.AuditedTxOf(e.db, i.c))
	srv, err := server.New(&server.Config{Addr: "127.0.0.1:0", Engine: i.c, Auth: store,
		Logger: slog.New(slog.DiscardHandler), Modules: []module.Web{i.m}})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	token, _, err = store.CreateToken(context.Background(), tokenName, role, "test", "browser test fixture")
	if err != nil {
		e.t.Fatal(err)
	}
	return srv.URL(), token
}

// evalStrings runs a JavaScript expression yielding an array of strings.
func evalStrings(t *testing.T, b *browsertest.Browser, step, expr string) []string {
	t.Helper()
	out, err := chromedp.Run(b.Ctx, chromedp.Evaluate[[]string](expr))
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	return out
}

// badges lists "code=words" for every badge under sel carrying the code
// in the data attribute attr (data-status, data-outcome).
func badges(t *testing.T, b *browsertest.Browser, step, sel, attr string) []string {
	t.Helper()
	return evalStrings(t, b, step, `Array.from(document.querySelectorAll(`+jsString(sel)+`)).map(e => e.getAttribute(`+
		jsString(attr)+`) + "=" + e.textContent.trim())`)
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
