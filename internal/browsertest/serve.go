package browsertest

import (
	"context"
	"database/sql"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsqlite"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/server"
	"github.com/keelwork/keel/server/auth"
)

// Served is Keel's real server (API, console, login) hosting modules for
// a browser test, on a PostgreSQL schema that holds the server's lines.
type Served struct {
	t *testing.T
	// Base is the console's base URL.
	Base  string
	store *auth.Store
}

// Serve starts the server for t on pool (the schema's connections), db
// and client (the engine the modules run on), hosting mods; it is shut
// down when t ends.
func Serve[TTx any](t *testing.T, pool *pgxpool.Pool, db keelsql.DB[TTx], client *keel.Client[TTx], mods ...module.Web) *Served {
	t.Helper()
	sqlDB := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = sqlDB.Close() })
	return ServeOn(t, sqlDB, db, client, mods...)
}

// ServeOn is Serve on a database/sql handle of db's own database (a
// SQLite driver's DB, or PostgreSQL's pool through stdlib).
func ServeOn[TTx any](t *testing.T, sqlDB *sql.DB, db keelsql.DB[TTx], client *keel.Client[TTx], mods ...module.Web) *Served {
	t.Helper()
	store := auth.NewStore(sqlDB, db.Dialect(), auth.AuditedTxOf(db, client))
	srv, err := server.New(&server.Config{Addr: "127.0.0.1:0", Engine: client, Auth: store,
		Logger: slog.New(slog.DiscardHandler), Modules: mods})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return &Served{t: t, Base: srv.URL(), store: store}
}

// Token creates a token for a person of name with role, to log in with.
func (s *Served) Token(name string, role auth.Role) string {
	s.t.Helper()
	token, _, err := s.store.CreateToken(context.Background(), name, role, "test", "browser test fixture")
	if err != nil {
		s.t.Fatal(err)
	}
	return token
}

// SQLite is a SQLite file for t with the server's lines and lines (a
// module's) migrated: what ServeOn runs on with the driver's DB.
func SQLite(t *testing.T, lines func(dialect string) []keelmigrate.Line) (*keelsqlite.Driver, string) {
	t.Helper()
	return testdb.OpenSQLite(t, &testdb.Options{Lines: withServer(lines)})
}

// Postgres is a PostgreSQL schema for t with the server's lines (tokens,
// sessions) and lines (a module's) migrated: what Serve runs on.
func Postgres(t *testing.T, lines func(dialect string) []keelmigrate.Line) (*keelpgx.Driver, string) {
	t.Helper()
	return testdb.OpenPostgres(t, &testdb.Options{Lines: withServer(lines)})
}
