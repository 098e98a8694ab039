package keelevents_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelsql"
)

func lines(dialect string) []keelmigrate.Line { return []keelmigrate.Line{keelevents.Line(dialect)} }

// tenv is one test database: its engine driver, keelsql handle and, for
// child processes, how to open it again.
type tenv[TTx any] struct {
	drv    keeldriver.Driver[TTx]
	db     keelsql.DB[TTx]
	dsn    string // PostgreSQL URL with search_path, or the SQLite file
	driver string // "postgres" or "sqlite"
}

func pgEnv(t testing.TB) *tenv[pgx.Tx] {
	d, schema := testdb.OpenPostgres(t, &testdb.Options{Lines: lines})
	return &tenv[pgx.Tx]{drv: d, db: keelsql.Pgx(d.Pool()), dsn: testdb.PostgresSchemaURL(t, schema), driver: "postgres"}
}

func liteEnv(t testing.TB) *tenv[*sql.Tx] {
	d, path := testdb.OpenSQLite(t, &testdb.Options{Lines: lines})
	return &tenv[*sql.Tx]{drv: d, db: keelsql.SQLite(d.DB()), dsn: path, driver: "sqlite"}
}

// each runs the two instantiations of a generic test, one per database.
func each(t *testing.T, pg func(t *testing.T, e *tenv[pgx.Tx]), lite func(t *testing.T, e *tenv[*sql.Tx])) {
	t.Run("postgres", func(t *testing.T) { t.Parallel(); pg(t, pgEnv(t)) })
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); lite(t, liteEnv(t)) })
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fastConfig keeps waits short in tests.
func fastConfig() *keelevents.Config {
	return &keelevents.Config{Partitions: 8, LeaseTTL: 2 * time.Second, StatsInterval: time.Hour, Logger: quiet()}
}

// newEvents builds Events on the in-database bus; start starts it with an
// engine client (for the audit log) and stops it when t ends.
func newEvents[TTx any](t *testing.T, env *tenv[TTx], cfg *keelevents.Config) *keelevents.Events[TTx] {
	t.Helper()
	bus, err := keelevents.NewDatabaseBus(env.db, &keelevents.DatabaseBusConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	if cfg == nil {
		cfg = fastConfig()
	}
	ev, err := keelevents.New(env.db, bus, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func start[TTx any](t *testing.T, env *tenv[TTx], ev *keelevents.Events[TTx]) {
	t.Helper()
	client, err := keel.NewClient(env.drv, &keel.Config{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	startWith(t, ev, client)
}

// startWith starts ev with client (nil: no engine client, so no outbox
// listener on PostgreSQL) and stops it when t ends.
func startWith[TTx any](t *testing.T, ev *keelevents.Events[TTx], client *keel.Client[TTx]) {
	t.Helper()
	if err := ev.Start(context.Background(), client); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ev.Stop(ctx); err != nil {
			t.Errorf("stopping events: %v", err)
		}
	})
}

// eventually waits for cond, checking every few milliseconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func emit[TTx any](t *testing.T, env *tenv[TTx], ev *keelevents.Events[TTx], e keelevents.Event) {
	t.Helper()
	err := env.db.InTx(context.Background(), func(tx keelsql.Tx[TTx]) error { return ev.EmitTx(context.Background(), tx, e) })
	if err != nil {
		t.Fatalf("emitting %s/%s: %v", e.Topic, e.ID, err)
	}
}

func count[TTx any](t *testing.T, env *tenv[TTx], query string, args ...any) int {
	t.Helper()
	var n int
	if err := env.db.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}
