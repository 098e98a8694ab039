package reservation

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsql"
)

// openInstance opens another driver (its own pool) on e's schema: a second
// process, as far as PostgreSQL can tell.
func openInstance(t *testing.T, e *env[pgx.Tx]) (*keelpgx.Driver, keelsql.DB[pgx.Tx]) {
	t.Helper()
	d, err := keelpgx.Open(context.Background(), testdb.PoolURL(t), &keelpgx.Config{Schema: e.schema})
	if err != nil {
		t.Fatalf("opening instance: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, keelsql.Pgx(d.Pool())
}

// Three instances, each with its own pool and engine client, scan the same
// 10,000 due reservations at once: each is released exactly once and each
// slot gets each place back exactly once. The instances' events are not
// started (the releases write them to the outbox, nothing relays them):
// this test is about the release, and 10,000 notices relayed and sent
// with nothing counting them cost most of its time under -race (alone, 18
// s with them, 5 s without). TestThreeInstancesNotifyEachOnce counts the
// notices.
func TestThreeInstancesReleaseEachOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 releases")
	}
	// Parallel like the package's other tests (it has its own schema). On
	// two cores under -race this did not shorten the package (48 s serial,
	// 50 s parallel, one run each): the release is bound by CPU there.
	t.Parallel()
	const due = 10000
	_, loader, instances := dueOnThreeInstances(t, due, func(e *env[pgx.Tx], db keelsql.DB[pgx.Tx], d *keelpgx.Driver) *Module[pgx.Tx] {
		return e.unrelayed(t, db, d)
	})
	releaseAll(t, instances, due)
	assertAllReleasedOnce(t, loader, due)
	if counts, _ := loader.StateCounts(context.Background()); counts[StateReleased] != due || counts[StatePaid] != 0 {
		t.Fatalf("states: %v", counts)
	}
}

// From the customers' side: three instances, each with its own pool,
// engine client, relay and notifier, release the same 300 due
// reservations, and every customer's webhook receives exactly one release
// notice, whichever instance released it and whichever sent it.
func TestThreeInstancesNotifyEachOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const due = 300
	h, webhook := newHook(t, 0)
	e, loader, instances := dueOnThreeInstances(t, due, func(e *env[pgx.Tx], db keelsql.DB[pgx.Tx], d *keelpgx.Driver) *Module[pgx.Tx] {
		return e.moduleOn(t, db, d, WithChannel(webhook), WithNotifyBackoff(10*time.Millisecond))
	})
	releaseAll(t, instances, due)
	assertAllReleasedOnce(t, loader, due)
	// Every notice at the receiver, then every event published and every
	// delivery acknowledged: past that point nothing can be sent again.
	eventually(t, "every notice at the receiver", func() bool { return len(h.messages()) >= due })
	settled := "SELECT (SELECT count(*) FROM keel_events_outbox WHERE published_at IS NULL) + " +
		"(SELECT count(*) FROM keel_events_bus_delivery)"
	eventually(t, "every event published and acknowledged", func() bool {
		var n int
		if err := e.db.QueryRow(ctx, settled).Scan(&n); err != nil {
			t.Fatalf("%s: %v", settled, err)
		}
		return n == 0
	})
	byReservation := map[int64]int{}
	keys := map[string]bool{}
	h.mu.Lock()
	for i, msg := range h.got {
		if msg.Kind != kindRelease {
			t.Errorf("unexpected %s notice for reservation %d", msg.Kind, msg.ReservationID)
		}
		byReservation[msg.ReservationID]++
		keys[h.keys[i]] = true
	}
	h.mu.Unlock()
	var twice []string
	for id, n := range byReservation {
		if n != 1 {
			twice = append(twice, fmt.Sprintf("%d×%d", id, n))
		}
	}
	if len(byReservation) != due || len(keys) != due || len(twice) > 0 {
		t.Fatalf("the receiver got notices for %d reservations under %d keys (want %d each); more than once: %v",
			len(byReservation), len(keys), due, twice)
	}
}

// dueOnThreeInstances loads due reservations, all past their release
// point, through a loader whose events are not started, and opens three
// instances on the same schema, each with its own pool, built by build.
func dueOnThreeInstances(t *testing.T, due int, build func(e *env[pgx.Tx], db keelsql.DB[pgx.Tx], d *keelpgx.Driver) *Module[pgx.Tx]) (*env[pgx.Tx], *Module[pgx.Tx], []*Module[pgx.Tx]) {
	t.Helper()
	e := newPGEnv(t)
	e.clock.Set(t0.Add(48 * 3600e9))
	loader := e.unrelayed(t, e.db, e.driver)
	if err := loader.benchLoad(context.Background(), due, due); err != nil {
		t.Fatal(err)
	}
	instances := make([]*Module[pgx.Tx], 3)
	for i := range instances {
		d, db := openInstance(t, e)
		instances[i] = build(e, db, d)
	}
	return e, loader, instances
}

// releaseAll runs the instances' scans at once until nothing is due and
// checks that they released want reservations in all.
func releaseAll(t *testing.T, instances []*Module[pgx.Tx], want int) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	totals := make([]int, len(instances))
	errs := make(chan error, len(instances))
	for i, m := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				run, err := m.Scan(ctx)
				if err != nil {
					errs <- err
					return
				}
				if run.Errors != "" {
					errs <- fmt.Errorf("run %d: %s", run.ID, run.Errors)
					return
				}
				totals[i] += run.Released
				if run.Scanned > 0 {
					continue
				}
				// Nothing claimable: done once nothing is due (rows another
				// instance holds are skipped, not missing).
				left, err := m.DueCount(ctx)
				if err != nil {
					errs <- err
					return
				}
				if left == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("instance failed: %v", err)
	}
	sum := 0
	for i, n := range totals {
		t.Logf("instance %d released %d", i, n)
		sum += n
	}
	if sum != want {
		t.Fatalf("instances released %d in all, want %d", sum, want)
	}
}

// assertAllReleasedOnce checks the exactly-once outcome: every due
// reservation released, none twice, every place back, no drift.
func assertAllReleasedOnce[TTx any](t *testing.T, m *Module[TTx], due int) {
	t.Helper()
	ctx := context.Background()
	counts, err := m.StateCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[StateReleased] < due {
		t.Fatalf("states after the release: %v", counts)
	}
	if n, err := m.DoubleReleases(ctx); err != nil || n != 0 {
		t.Fatalf("double releases: %d %v", n, err)
	}
	noDrift(t, m)
	if left, err := m.DueCount(ctx); err != nil || left != 0 {
		t.Fatalf("still due: %d %v", left, err)
	}
}
