package reservation

import (
	"context"
	"fmt"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
)

// benchCapacity is the places of each benchmark slot.
const benchCapacity = 10

// BenchRelease measures the release path: it bulk-loads total reservations
// (due of them paid and past their release point) into a new resource of
// the "bench" category, then runs scans back to back at the default page
// and transaction sizes until none is due, and returns how long the scans
// took (loading excluded). The module's and the events migration lines must be applied;
// client may be insert-only (notification jobs are queued, not run).
func BenchRelease[TTx any](ctx context.Context, db keelsql.DB[TTx], client *keel.Client[TTx], total, due int) (time.Duration, error) {
	// The events outbox takes the availability events; no relay runs (the
	// release path is what is measured). The events line must be applied.
	bus, err := keelevents.NewDatabaseBus(db, nil)
	if err != nil {
		return 0, err
	}
	defer bus.Close()
	events, err := keelevents.New(db, bus, &keelevents.Config{DisableRelay: true})
	if err != nil {
		return 0, err
	}
	m, err := New(&module.Host[TTx]{DB: db, Events: events})
	if err != nil {
		return 0, err
	}
	if err := m.client.Bind(client); err != nil {
		return 0, err
	}
	if err := m.benchLoad(ctx, total, due); err != nil {
		return 0, err
	}
	start := time.Now()
	released, err := m.releaseAllDue(ctx)
	elapsed := time.Since(start)
	if err != nil {
		return elapsed, err
	}
	if released != due {
		return elapsed, fmt.Errorf("released %d of %d due reservations", released, due)
	}
	return elapsed, nil
}

// releaseAllDue runs scans until one finds less than a page.
func (m *Module[TTx]) releaseAllDue(ctx context.Context) (int, error) {
	released := 0
	for {
		run, err := m.Scan(ctx)
		if err != nil {
			return released, err
		}
		if run.Errors != "" {
			return released, fmt.Errorf("run %d: %s", run.ID, run.Errors)
		}
		released += run.Released
		if run.Scanned < m.set.pageSize {
			return released, nil
		}
	}
}

// benchLoad inserts the benchmark's rows with set-based statements.
func (m *Module[TTx]) benchLoad(ctx context.Context, total, due int) error {
	if total < 1 || due < 1 || due > total {
		return fmt.Errorf("bench: want 1 <= due <= total, got due %d of %d", due, total)
	}
	if total%due != 0 {
		// The loader marks every n-th row due; n must divide total.
		return fmt.Errorf("bench: total (%d) must be a multiple of due (%d)", total, due)
	}
	every := total / due
	now := m.now()
	first := now.Add(-24 * time.Hour).Truncate(time.Minute)
	slots := (total + benchCapacity - 1) / benchCapacity
	if _, err := m.st.db.Exec(ctx, m.st.sql("BenchCategory"), now); err != nil {
		return fmt.Errorf("bench: category: %w", err)
	}
	var resource int64
	if err := m.st.db.QueryRow(ctx, m.st.sql("BenchResource"), fmt.Sprintf("bench-%d", now.UnixNano()), now).Scan(&resource); err != nil {
		return fmt.Errorf("bench: resource: %w", err)
	}
	steps := []struct {
		name string
		args []any
	}{
		{"BenchSlots", []any{resource, slots, benchCapacity, first}},
		{"BenchReservations", []any{resource, total, every, benchCapacity, now, first}},
		{"BenchHeld", []any{resource}},
		{"BenchAnalyze", nil},
	}
	for _, s := range steps {
		if _, err := m.st.db.Exec(ctx, m.st.sql(s.name), s.args...); err != nil {
			return fmt.Errorf("bench: %s: %w", s.name, err)
		}
	}
	if _, err := m.st.db.Exec(ctx, m.st.sql("BenchCheckpoint")); err != nil {
		m.log.Info("bench: checkpoint refused; the release may share the disk with it", "error", err)
	}
	return nil
}
