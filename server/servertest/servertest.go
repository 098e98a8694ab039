// Package servertest builds servers on fresh test databases (both
// drivers, through internal/testdb, with the server's migration line) with
// one token per role, for the tests of server/... and the CLI.
package servertest

import (
	"context"
	"database/sql"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/server"
	"github.com/keelwork/keel/server/api"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/migration"
)

// Env is a server on a test database.
type Env struct {
	Name   string
	Server *server.Server
	Engine api.Engine
	Store  *auth.Store
	// Tokens holds a secret per role.
	Tokens map[auth.Role]string
	// Insert inserts jobs through the engine.
	Insert func(ctx context.Context, args keel.JobArgs, opts *keel.InsertOpts) (int64, error)
	// CreateBatch creates a batch of n items (subjects "s001"…, keys
	// app:1..3) over a test table through preview → create, as actor.
	CreateBatch func(ctx context.Context, actor, reason string, n int) (int64, error)
	// Digest digests every table (see Digest).
	Digest func() string
	// DB is the test database, for a test that must put rows in a state
	// no route produces (counters that drifted from their items).
	DB *sql.DB
	// ReconcileBatch recounts a batch's counters from its items and
	// repairs them, as the engine's reconciliation does.
	ReconcileBatch func(ctx context.Context, id int64) error
}

var lines = &testdb.Options{Lines: migration.Lines}

// Each runs f on a PostgreSQL and a SQLite environment, in parallel.
func Each(t *testing.T, f func(t *testing.T, e *Env)) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		f(t, Postgres(t))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		f(t, SQLite(t))
	})
}

// Postgres builds an Env on a fresh PostgreSQL schema.
func Postgres(t testing.TB) *Env {
	d, _ := testdb.OpenPostgres(t, lines)
	db := stdlib.OpenDBFromPool(d.Pool())
	t.Cleanup(func() { _ = db.Close() })
	return build(t, "postgres", d, db, keelsql.Pgx(d.Pool()))
}

// SQLite builds an Env on a fresh SQLite file.
func SQLite(t testing.TB) *Env {
	d, _ := testdb.OpenSQLite(t, lines)
	return build(t, "sqlite", d, d.DB(), keelsql.SQLite(d.DB()))
}

// Args is the test job kind (no worker runs it: the client inserts only).
type Args struct {
	N int `json:"n"`
}

// Kind names the test kind.
func (Args) Kind() string { return "test.noop" }

func build[TTx any](t testing.TB, name string, d keeldriver.Driver[TTx], db *sql.DB, mdb keelsql.DB[TTx]) *Env {
	t.Helper()
	client, err := keel.NewClient(d, &keel.Config{Logger: slog.New(slog.DiscardHandler),
		BatchSigningKey: []byte("servertest batch signing key")})
	if err != nil {
		t.Fatalf("servertest: client: %v", err)
	}
	store := auth.NewStore(db, d.Dialect(), auth.AuditedTxOf(mdb, client))
	srv, err := server.New(&server.Config{Addr: "127.0.0.1:0", Engine: client, Auth: store,
		SampleInterval: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		Modules: []module.Web{Probe{}}})
	if err != nil {
		t.Fatalf("servertest: server: %v", err)
	}
	e := &Env{Name: name, Server: srv, Engine: client, Store: store, Tokens: map[auth.Role]string{},
		Insert: func(ctx context.Context, args keel.JobArgs, opts *keel.InsertOpts) (int64, error) {
			res, err := client.Insert(ctx, args, opts)
			if err != nil {
				return 0, err
			}
			return res.Job.ID, nil
		}}
	e.Digest = Digest(t, db, d.Dialect())
	e.DB = db
	e.ReconcileBatch = func(ctx context.Context, id int64) error {
		_, err := client.BatchReconcile(ctx, id, true)
		return err
	}
	items := &itemTable{db: db}
	e.CreateBatch = func(ctx context.Context, actor, reason string, n int) (int64, error) {
		return items.createBatch(ctx, clientOf[TTx]{client}, actor, reason, n)
	}
	for _, r := range []auth.Role{auth.RoleViewer, auth.RoleOperator, auth.RoleAdmin} {
		secret, _, err := store.CreateToken(context.Background(), "t-"+r.String(), r, "servertest", "test fixture")
		if err != nil {
			t.Fatalf("servertest: token: %v", err)
		}
		e.Tokens[r] = secret
	}
	return e
}

// Start listens on a free loopback port; the server shuts down with t.
func (e *Env) Start(t testing.TB) string {
	t.Helper()
	if err := e.Server.Start(context.Background()); err != nil {
		t.Fatalf("servertest: start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.Server.Shutdown(ctx)
	})
	return e.Server.URL()
}
