// Package moduletest is the module test kit: run a test on both databases
// (each a fresh, migrated PostgreSQL schema or SQLite file of its own, so
// the subtests run in parallel), a host whose clock the test moves and
// whose logger is quiet, the events backbone and an engine client on the
// test's database, the module's admin API served and called over HTTP as
// Keel's server serves it, its `keel` verbs run as a user types them, what
// its home card and search show the operator, and the one way to wait for
// a condition.
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
	"context"
	"database/sql"
	"io"
	"log/slog"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/internal/testwait"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelevents"
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
	// DSN is how another process (a Keel process the test starts, or
	// kills) opens the same database: the PostgreSQL URL with the schema
	// as its search_path, or the SQLite file.
	DSN string
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
	Both(t, lines, pg, lite)
}

// Both is Each without making t itself parallel: for a subtest that is
// parallel already (t.Parallel may be called once), and for a test that
// runs with the package's sequential tests because it must not share the
// machine with them. The two databases still run side by side.
func Both(t *testing.T, lines func(dialect string) []keelmigrate.Line,
	pg func(*testing.T, *Env[pgx.Tx]), lite func(*testing.T, *Env[*sql.Tx])) {
	t.Helper()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		pg(t, Postgres(t, lines))
	})
	if SQLiteLeftApart(t) {
		return
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		lite(t, SQLite(t, lines))
	})
}

// SQLiteLeftApart reports whether a two-driver test leaves its SQLite run
// to `make test`'s step without the race detector (KEEL_TEST_SQLITE_APART
// =skip, set for the -race step; see internal/testdb.EnvSQLiteApart), and
// says so on t. A module's own two-driver helper calls it before its
// SQLite subtest; Both already does.
func SQLiteLeftApart(t testing.TB) bool {
	if testdb.SQLiteApart() != "skip" {
		return false
	}
	t.Helper()
	t.Logf("sqlite subtest: run by make test without -race (%s=only go test -run '%s/^sqlite$')", testdb.EnvSQLiteApart, t.Name())
	return true
}

// With adapts a test that takes a module's own environment W (a struct
// embedding *Env, with the module's parts beside it) to one that Each and
// Both run: build makes W from the kit's Env.
//
//	moduletest.Each(t, lines, moduletest.With(newEnv[pgx.Tx], testNote[pgx.Tx]),
//		moduletest.With(newEnv[*sql.Tx], testNote[*sql.Tx]))
func With[TTx, W any](build func(*Env[TTx]) W, test func(*testing.T, W)) func(*testing.T, *Env[TTx]) {
	return func(t *testing.T, e *Env[TTx]) { test(t, build(e)) }
}

// Lines joins the migration lines of several owners (nil ones left out)
// in the order given, the events backbone's and reconciliation's before
// the module's that uses them, into the one lines function Each migrates.
func Lines(of ...func(dialect string) []keelmigrate.Line) func(dialect string) []keelmigrate.Line {
	return func(dialect string) []keelmigrate.Line {
		var out []keelmigrate.Line
		for _, lines := range of {
			if lines != nil {
				out = append(out, lines(dialect)...)
			}
		}
		return out
	}
}

// EventsLines is the events backbone's line, for Lines.
func EventsLines(dialect string) []keelmigrate.Line {
	return []keelmigrate.Line{keelevents.Line(dialect)}
}

// Postgres is an Env on a fresh PostgreSQL schema, dropped when t ends.
func Postgres(t testing.TB, lines func(dialect string) []keelmigrate.Line) *Env[pgx.Tx] {
	t.Helper()
	d, schema := testdb.OpenPostgres(t, &testdb.Options{Lines: lines})
	return &Env[pgx.Tx]{Name: "postgres", Driver: d, DB: keelsql.Pgx(d.Pool()), Schema: schema,
		DSN: testdb.PostgresSchemaURL(t, schema), Clock: NewClock(Start)}
}

// SQLite is an Env on a fresh SQLite file under t.TempDir().
func SQLite(t testing.TB, lines func(dialect string) []keelmigrate.Line) *Env[*sql.Tx] {
	t.Helper()
	d, path := testdb.OpenSQLite(t, &testdb.Options{Lines: lines})
	return &Env[*sql.Tx]{Name: "sqlite", Driver: d, DB: keelsql.SQLite(d.DB()), DSN: path, Clock: NewClock(Start)}
}

// Host is a module host on e: its database, a quiet logger, e's clock and
// settings (keys "<module>.<name>").
func (e *Env[TTx]) Host(settings map[string]string) *module.Host[TTx] {
	return &module.Host[TTx]{DB: e.DB, Logger: Quiet(), Clock: e.Clock.Now, Settings: settings}
}

// Client is an engine client on e with a quiet logger (cfg may be nil),
// not started: an insert-only client as it is, or one a test starts and
// stops itself (Run does both).
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

// Part is what a test runs on its engine client: a module, the events
// backbone, reconciliation. One with a Stop method is stopped when the
// test ends.
type Part[TTx any] interface {
	Start(ctx context.Context, client *keel.Client[TTx]) error
}

// Run makes an engine client on e with cfg, which the parts have
// configured already (each in the order it needs: one may read what
// another added), starts it and then parts in order, and returns the
// client. When t ends the parts stop in reverse order and then the client,
// cancelling the jobs still running: the test's checks are done by then,
// and a job finishing its work would only hold the next test up.
func (e *Env[TTx]) Run(t testing.TB, cfg *keel.Config, parts ...Part[TTx]) *keel.Client[TTx] {
	t.Helper()
	c := e.Client(t, cfg)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("engine client start: %v", err)
	}
	started := 0
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i := started - 1; i >= 0; i-- {
			if s, ok := parts[i].(interface{ Stop(context.Context) error }); ok {
				_ = s.Stop(ctx)
			}
		}
		_ = c.StopAndCancel(ctx)
	})
	for _, p := range parts {
		if err := p.Start(ctx, c); err != nil {
			t.Fatalf("starting %T: %v", p, err)
		}
		started++
	}
	return c
}

// Events is the events backbone on e's database over the in-database bus,
// as a module's test runs it: cfg (nil: the defaults) with a quiet logger
// unless cfg names one. It is not started (the test starts it with its
// engine client); the bus is closed when t ends, after whatever the test
// stopped in its own cleanups registered later.
func (e *Env[TTx]) Events(t testing.TB, cfg *keelevents.Config) *keelevents.Events[TTx] {
	t.Helper()
	if cfg == nil {
		cfg = &keelevents.Config{}
	}
	if cfg.Logger == nil {
		cfg.Logger = Quiet()
	}
	bus, err := keelevents.NewDatabaseBus(e.DB, &keelevents.DatabaseBusConfig{Logger: cfg.Logger})
	if err != nil {
		t.Fatalf("events bus: %v", err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	ev, err := keelevents.New(e.DB, bus, cfg)
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	return ev
}

// SQL is a test's query in e's dialect: written once with PostgreSQL's
// numbered parameters $1, $2 …, which SQLite reads as ?1, ?2 … (a number
// may repeat on both).
func (e *Env[TTx]) SQL(query string) string {
	if e.DB.Dialect() == "sqlite" {
		return numbered.ReplaceAllString(query, "?$1")
	}
	return query
}

// Count runs query (written as for SQL), which selects one number, on e's
// database.
func (e *Env[TTx]) Count(t testing.TB, query string, args ...any) int64 {
	t.Helper()
	query = e.SQL(query)
	var n int64
	if err := e.DB.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// numbered is PostgreSQL's $n parameter.
var numbered = regexp.MustCompile(`\$([0-9]+)`)

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
