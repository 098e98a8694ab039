package browsertest

import (
	"database/sql"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsqlite"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/migration"
)

// A module's browser test runs its module inside Keel's real server, so
// its database holds the server's lines (tokens, sessions, the audit log)
// besides the module's: PostgresEnv, SQLiteEnv and Both are the module
// test kit's environments with them, ServeEnv serves one, and Session is
// one operator's logged-in browser on it.
//
//	e := browsertest.PostgresEnv(t, notes.Lines)
//	… the module started on e with client …
//	srv := browsertest.ServeEnv(t, e, client, m)
//	br := srv.Session("ops-li", auth.RoleOperator, 90*time.Second)

// PostgresEnv is moduletest.Postgres with the server's lines migrated
// before lines (a module's).
func PostgresEnv(t *testing.T, lines func(dialect string) []keelmigrate.Line) *moduletest.Env[pgx.Tx] {
	t.Helper()
	return moduletest.Postgres(t, withServer(lines))
}

// SQLiteEnv is moduletest.SQLite with the server's lines migrated before
// lines.
func SQLiteEnv(t *testing.T, lines func(dialect string) []keelmigrate.Line) *moduletest.Env[*sql.Tx] {
	t.Helper()
	return moduletest.SQLite(t, withServer(lines))
}

// Both is moduletest.Both with the server's lines: pg and lite as parallel
// subtests "postgres" and "sqlite", each on its own database. t itself is
// not made parallel: a browser test decides whether it shares the machine
// with the package's other tests.
func Both(t *testing.T, lines func(dialect string) []keelmigrate.Line,
	pg func(*testing.T, *moduletest.Env[pgx.Tx]), lite func(*testing.T, *moduletest.Env[*sql.Tx])) {
	t.Helper()
	moduletest.Both(t, withServer(lines), pg, lite)
}

// withServer is lines (nil: none) after the server's own.
func withServer(lines func(dialect string) []keelmigrate.Line) func(dialect string) []keelmigrate.Line {
	return moduletest.Lines(migration.Lines, lines)
}

// ServeEnv is Serve (PostgreSQL) or ServeOn (SQLite) on e's database:
// Keel's server hosting mods, which run on client, until t ends.
func ServeEnv[TTx any](t *testing.T, e *moduletest.Env[TTx], client *keel.Client[TTx], mods ...module.Web) *Served {
	t.Helper()
	switch d := any(e.Driver).(type) {
	case *keelpgx.Driver:
		return Serve(t, d.Pool(), e.DB, client, mods...)
	case *keelsqlite.Driver:
		return ServeOn(t, d.DB(), e.DB, client, mods...)
	}
	t.Fatalf("browsertest: no database/sql handle for a %T", e.Driver)
	return nil
}

// Session is one person's browser on the console: a token for name with
// role, Chromium started for the test (each step within timeout) and
// logged in with the token. Two sessions are two people (a request and
// its second person's approval).
func (s *Served) Session(name string, role auth.Role, timeout time.Duration) *Browser {
	s.t.Helper()
	token := s.Token(name, role)
	b := New(s.t, timeout)
	b.Login(s.Base, token)
	return b
}
