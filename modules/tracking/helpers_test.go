package tracking

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/modules/tracking/domain"
)

var (
	_ module.Module[pgx.Tx]  = (*Module[pgx.Tx])(nil)
	_ module.Module[*sql.Tx] = (*Module[*sql.Tx])(nil)
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var t0 = time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)

type env[TTx any] struct {
	driver keeldriver.Driver[TTx]
	db     keelsql.DB[TTx]
	schema string
	clock  *clock
}

func lines(dialect string) []keelmigrate.Line {
	out := []keelmigrate.Line{keelevents.Line(dialect)}
	out = append(out, keelrecon.Lines(dialect)...)
	return append(out, Lines(dialect)...)
}

func runBoth(t *testing.T, pg func(*testing.T, *env[pgx.Tx]), lite func(*testing.T, *env[*sql.Tx])) {
	t.Helper()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		d, schema := testdb.OpenPostgres(t, &testdb.Options{Lines: lines})
		pg(t, &env[pgx.Tx]{driver: d, db: keelsql.Pgx(d.Pool()), schema: schema, clock: &clock{t: t0}})
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		d, _ := testdb.OpenSQLite(t, &testdb.Options{Lines: lines})
		lite(t, &env[*sql.Tx]{driver: d, db: keelsql.SQLite(d.DB()), clock: &clock{t: t0}})
	})
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// module builds the module with the demo carriers (or cs) on an
// insert-only engine client and an events backbone on the database bus.
func (e *env[TTx]) module(t testing.TB, cs ...domain.Carrier) (*Module[TTx], *keelevents.Events[TTx]) {
	t.Helper()
	if cs == nil {
		cs = domain.DemoCarriers()
	}
	rc, err := keelrecon.New(e.db, nil)
	if err != nil {
		t.Fatalf("recon: %v", err)
	}
	m, err := New(&module.Host[TTx]{DB: e.db, Logger: quiet(), Recon: rc}, WithCarriers(cs...), WithClock(e.clock.Now))
	if err != nil {
		t.Fatalf("new module: %v", err)
	}
	bus, err := keelevents.NewDatabaseBus(e.db, nil)
	if err != nil {
		t.Fatalf("bus: %v", err)
	}
	ev, err := keelevents.New(e.db, bus, &keelevents.Config{Logger: quiet()})
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	m.UseEvents(ev)
	client, err := keel.NewClient(e.driver, &keel.Config{Logger: quiet()})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	if err := rc.Start(context.Background(), client); err != nil {
		t.Fatalf("recon start: %v", err)
	}
	if err := m.Start(context.Background(), client); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	return m, ev
}

func count[TTx any](t testing.TB, e *env[TTx], query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := e.db.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}
