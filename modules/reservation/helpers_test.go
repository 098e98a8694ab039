package reservation

import (
	"context"
	"database/sql"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
)

// The module must satisfy the seam on both drivers.
var (
	_ module.Module[pgx.Tx]  = (*Module[pgx.Tx])(nil)
	_ module.Module[*sql.Tx] = (*Module[*sql.Tx])(nil)
)

// testClock is the controllable clock every decision of the module reads.
type testClock = moduletest.Clock

// env is one fresh database with the module's line migrated.
type env[TTx any] struct {
	driver keeldriver.Driver[TTx]
	db     keelsql.DB[TTx]
	schema string // PostgreSQL only
	clock  *testClock
}

// lines are the events line (which the module emits to) and the module's.
func lines(dialect string) []keelmigrate.Line {
	return append([]keelmigrate.Line{keelevents.Line(dialect)}, Lines(dialect)...)
}

// t0 is a Monday 10:00 in Shanghai, the tests' reference instant.
var t0 = moduletest.Start

// runBoth runs a test body on PostgreSQL and on SQLite, in parallel with
// each other and with the package's other tests (each owns its databases).
func runBoth(t *testing.T, pg func(*testing.T, *env[pgx.Tx]), lite func(*testing.T, *env[*sql.Tx])) {
	t.Helper()
	t.Parallel()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		pg(t, newPGEnv(t))
	})
	if moduletest.SQLiteLeftApart(t) {
		return
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		lite(t, newSQLiteEnv(t))
	})
}

func newPGEnv(t testing.TB) *env[pgx.Tx] {
	e := moduletest.Postgres(t, lines)
	return &env[pgx.Tx]{driver: e.Driver, db: e.DB, schema: e.Schema, clock: e.Clock}
}

func newSQLiteEnv(t testing.TB) *env[*sql.Tx] {
	e := moduletest.SQLite(t, lines)
	return &env[*sql.Tx]{driver: e.Driver, db: e.DB, clock: e.Clock}
}

func quiet() *slog.Logger { return moduletest.Quiet() }

// module builds a module on e with an insert-only client (jobs are queued,
// not run): tests drive scans and workers by hand.
func (e *env[TTx]) module(t testing.TB, opts ...Option) *Module[TTx] {
	t.Helper()
	return e.moduleOn(t, e.db, e.driver, opts...)
}

func (e *env[TTx]) moduleOn(t testing.TB, db keelsql.DB[TTx], d keeldriver.Driver[TTx], opts ...Option) *Module[TTx] {
	t.Helper()
	return e.moduleWith(t, db, d, nil, opts...)
}

// moduleWith is moduleOn with settings.
func (e *env[TTx]) moduleWith(t testing.TB, db keelsql.DB[TTx], d keeldriver.Driver[TTx], settings map[string]string, opts ...Option) *Module[TTx] {
	t.Helper()
	return e.build(t, db, d, settings, true, opts...)
}

// unrelayed is moduleOn whose events are not started: its releases still
// write their events to the outbox in the release's transaction, but no
// relay publishes them and no notifier sends them. For a test of the
// release alone.
func (e *env[TTx]) unrelayed(t testing.TB, db keelsql.DB[TTx], d keeldriver.Driver[TTx], opts ...Option) *Module[TTx] {
	t.Helper()
	return e.build(t, db, d, nil, false, opts...)
}

func (e *env[TTx]) build(t testing.TB, db keelsql.DB[TTx], d keeldriver.Driver[TTx], settings map[string]string, events bool, opts ...Option) *Module[TTx] {
	t.Helper()
	opts = append([]Option{WithClock(e.clock.Now), WithRetryBackoff(time.Millisecond, time.Millisecond)}, opts...)
	ev := testEvents(t, db)
	m, err := New(&module.Host[TTx]{DB: db, Logger: quiet(), Settings: settings, Events: ev}, opts...)
	if err != nil {
		t.Fatalf("new module: %v", err)
	}
	client, err := keel.NewClient(d, &keel.Config{Logger: quiet()})
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	if err := m.Start(context.Background(), client); err != nil {
		t.Fatalf("start: %v", err)
	}
	if events {
		startEvents(t, ev, client)
	}
	return m
}

// fixture is a category, a resource and a slot starting at t0.
type fixture struct {
	cat  *Category
	res  *Resource
	slot *Slot
}

func defaultSettings() CategorySettings {
	return CategorySettings{NameZH: "工位", NameEN: "Workstation", GraceMinutes: 15, ReminderMinutes: 15,
		AppealMinutes: 30, HoldMinutes: 10, ReleaseMode: ModeOn}
}

func setup[TTx any](t testing.TB, m *Module[TTx], capacity int) *fixture {
	t.Helper()
	ctx := context.Background()
	cat, err := m.CreateCategory(ctx, "ws", defaultSettings(), "test fixture")
	if err != nil {
		t.Fatalf("category: %v", err)
	}
	res, err := m.CreateResource(ctx, "ws", "A-01", "3F")
	if err != nil {
		t.Fatalf("resource: %v", err)
	}
	slot, err := m.CreateSlot(ctx, res.ID, t0, t0.Add(time.Hour), capacity)
	if err != nil {
		t.Fatalf("slot: %v", err)
	}
	return &fixture{cat: cat, res: res, slot: slot}
}

// paid books and pays a reservation of slot for user.
func paid[TTx any](t testing.TB, m *Module[TTx], slot int64, user string) *Reservation {
	t.Helper()
	ctx := context.Background()
	r, err := m.Book(ctx, slot, user)
	if err != nil {
		t.Fatalf("book: %v", err)
	}
	r, err = m.Pay(ctx, r.ID, r.Version)
	if err != nil {
		t.Fatalf("pay: %v", err)
	}
	return r
}

func mustScan[TTx any](t testing.TB, m *Module[TTx]) *Run {
	t.Helper()
	run, err := m.Scan(context.Background())
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	return run
}

func state[TTx any](t testing.TB, m *Module[TTx], id int64) *Reservation {
	t.Helper()
	r, err := m.Reservation(context.Background(), id)
	if err != nil {
		t.Fatalf("get %d: %v", id, err)
	}
	return r
}

func held[TTx any](t testing.TB, m *Module[TTx], slot int64) int {
	t.Helper()
	s, err := m.slot(context.Background(), slot)
	if err != nil {
		t.Fatalf("slot %d: %v", slot, err)
	}
	return s.Held
}

// noDrift fails unless every slot's held count equals the reservations
// holding it.
func noDrift[TTx any](t testing.TB, m *Module[TTx]) {
	t.Helper()
	drifts, err := m.CheckInvariant(context.Background(), 0)
	if err != nil {
		t.Fatalf("invariant: %v", err)
	}
	if len(drifts) > 0 {
		t.Fatalf("capacity drifted: %+v", drifts)
	}
}

func wantState[TTx any](t testing.TB, m *Module[TTx], id int64, want State) *Reservation {
	t.Helper()
	r := state(t, m, id)
	if r.State != want {
		t.Fatalf("reservation %d is %s, want %s", id, r.State, want)
	}
	return r
}
