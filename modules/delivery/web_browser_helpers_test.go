package delivery

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/server/auth"
)

// newServedEnv is a PostgreSQL schema with the server's lines (tokens,
// sessions) and the delivery line migrated.
func newServedEnv(t *testing.T) *env[pgx.Tx] {
	t.Helper()
	d, schema := browsertest.Postgres(t, Lines)
	return &env[pgx.Tx]{t: t, d: d, pg: d, schema: schema, db: keelsql.Pgx(d.Pool())}
}

// serve starts Keel's real server (API, console, login) hosting the
// instance's module, and returns its base URL with a token of the given
// name and role for logging in.
func (e *env[TTx]) serve(i *inst[TTx], tokenName string, role auth.Role) (base, token string) {
	e.t.Helper()
	srv := browsertest.Serve(e.t, e.pg.Pool(), e.db, i.c, i.m)
	return srv.Base, srv.Token(tokenName, role)
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
