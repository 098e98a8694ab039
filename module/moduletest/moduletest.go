// Package moduletest is the module test kit: run a test on both databases
// (each a fresh, migrated PostgreSQL schema or SQLite file of its own, so
// the subtests run in parallel), a host whose clock the test moves and
// whose logger is quiet, and the one way to wait for a condition.
//
//	func TestNote(t *testing.T) {
//		moduletest.Each(t, notes.Lines, testNote[pgx.Tx], testNote[*sql.Tx])
//	}
//
//	func testNote[TTx any](t *testing.T, e *moduletest.Env[TTx]) {
//		m, err := notes.New(e.Host(nil))
//		...
//		e.Clock.Add(time.Hour)
//		moduletest.WaitFor(t, 5*time.Second, "the reminder", func() bool { return sent(m) })
//	}
package moduletest

import (
	"database/sql"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/internal/testwait"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
)

// Env is one fresh database with the engine's and the module's lines
// migrated.
type Env[TTx any] struct {
	// Name is "postgres" or "sqlite".
	Name string
	// Driver is the engine's driver on the database, for keel.NewClient.
	Driver keeldriver.Driver[TTx]
	// DB runs the module's SQL on the same database.
	DB keelsql.DB[TTx]
	// Schema is the PostgreSQL schema ("" on SQLite).
	Schema string
	// Clock is the clock Host gives the module; it starts at Start.
	Clock *Clock
}

// Start is where every Env's clock starts: a Monday, 10:00 in Shanghai.
var Start = time.Date(2030, 1, 7, 2, 0, 0, 0, time.UTC)

// Each runs pg and lite as parallel subtests "postgres" and "sqlite", each
// on its own database with lines (the module's migration lines) applied.
// The test itself runs in parallel with the package's other parallel tests:
// it owns its databases, so it shares nothing with them.
func Each(t *testing.T, lines func(dialect string) []keelmigrate.Line,
	pg func(*testing.T, *Env[pgx.Tx]), lite func(*testing.T, *Env[*sql.Tx])) {
	t.Helper()
	t.Parallel()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		pg(t, Postgres(t, lines))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		lite(t, SQLite(t, lines))
	})
}

// Postgres is an Env on a fresh PostgreSQL schema, dropped when t ends.
func Postgres(t testing.TB, lines func(dialect string) []keelmigrate.Line) *Env[pgx.Tx] {
	t.Helper()
	d, schema := testdb.OpenPostgres(t, &testdb.Options{Lines: lines})
	return &Env[pgx.Tx]{Name: "postgres", Driver: d, DB: keelsql.Pgx(d.Pool()), Schema: schema, Clock: NewClock(Start)}
}

// SQLite is an Env on a fresh SQLite file under t.TempDir().
func SQLite(t testing.TB, lines func(dialect string) []keelmigrate.Line) *Env[*sql.Tx] {
	t.Helper()
	d, _ := testdb.OpenSQLite(t, &testdb.Options{Lines: lines})
	return &Env[*sql.Tx]{Name: "sqlite", Driver: d, DB: keelsql.SQLite(d.DB()), Clock: NewClock(Start)}
}

// Host is a module host on e: its database, a quiet logger, e's clock and
// settings (keys "<module>.<name>").
func (e *Env[TTx]) Host(settings map[string]string) *module.Host[TTx] {
	return &module.Host[TTx]{DB: e.DB, Logger: Quiet(), Clock: e.Clock.Now, Settings: settings}
}

// Client is an engine client on e with a quiet logger (cfg may be nil),
// not started: a test that runs workers starts it and stops it.
func (e *Env[TTx]) Client(t testing.TB, cfg *keel.Config) *keel.Client[TTx] {
	t.Helper()
	if cfg == nil {
		cfg = &keel.Config{}
	}
	if cfg.Logger == nil {
		cfg.Logger = Quiet()
	}
	c, err := keel.NewClient(e.Driver, cfg)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return c
}

// Quiet is a logger that writes nothing.
func Quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// WaitFor polls cond until it holds, failing t after within: tests wait
// for a condition of the system, never for a fixed time.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, within, what, cond)
}

// WaitUntil polls cond like WaitFor and reports whether it held in time,
// failing nothing: for a goroutine that holds a simulator's answer until
// the system reached a state.
func WaitUntil(within time.Duration, cond func() bool) bool { return testwait.Until(within, cond) }

// Clock is a clock the test moves by hand.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock is a clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
