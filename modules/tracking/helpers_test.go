package tracking

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/tracking/domain"
)

var (
	_ module.Module[pgx.Tx]  = (*Module[pgx.Tx])(nil)
	_ module.Module[*sql.Tx] = (*Module[*sql.Tx])(nil)
)

// t0 is where every test's clock starts, on the day the tests' simulated
// journeys are dated.
var t0 = time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)

// env is one test database (the kit's Env) whose clock reads t0.
type env[TTx any] struct {
	*moduletest.Env[TTx]
}

func newEnv[TTx any](e *moduletest.Env[TTx]) *env[TTx] {
	e.Clock.Set(t0)
	return &env[TTx]{e}
}

var lines = moduletest.Lines(moduletest.EventsLines, keelrecon.Lines, Lines)

// runBoth runs a generic test once per database, the two side by side.
func runBoth(t *testing.T, pg func(*testing.T, *env[pgx.Tx]), lite func(*testing.T, *env[*sql.Tx])) {
	t.Helper()
	moduletest.Both(t, lines, moduletest.With(newEnv[pgx.Tx], pg), moduletest.With(newEnv[*sql.Tx], lite))
}

// module builds the module with the demo carriers (or cs) on an
// insert-only engine client and an events backbone on the database bus.
func (e *env[TTx]) module(t testing.TB, cs ...domain.Carrier) (*Module[TTx], *keelevents.Events[TTx]) {
	t.Helper()
	if cs == nil {
		cs = domain.DemoCarriers()
	}
	rc, err := keelrecon.New(e.DB, nil)
	if err != nil {
		t.Fatalf("recon: %v", err)
	}
	m, err := New(&module.Host[TTx]{DB: e.DB, Logger: moduletest.Quiet(), Recon: rc}, WithCarriers(cs...), WithClock(e.Clock.Now))
	if err != nil {
		t.Fatalf("new module: %v", err)
	}
	ev := e.Events(t, nil)
	m.UseEvents(ev)
	client := e.Client(t, nil)
	if err := rc.Start(context.Background(), client); err != nil {
		t.Fatalf("recon start: %v", err)
	}
	if err := m.Start(context.Background(), client); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	return m, ev
}
