package inventory

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/modules/inventory/domain"
	"github.com/keelwork/keel/modules/inventory/sim"
)

// clock is a test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestInventoryTimeoutReleaseQueriesFirst: past their time, reservations
// are released only when the order service and the warehouse both say
// the stock is not needed; a shipped order is kept; an unknown answer is
// delayed, and after the budget goes to a person; a reservation confirmed
// while the check was asking is not released.
func TestInventoryTimeoutReleaseQueriesFirst(t *testing.T) {
	each(t, testTimeout[pgx.Tx], testTimeout[*sql.Tx])
}

func testTimeout[TTx any](t *testing.T, e *tenv[TTx]) {
	ctx := context.Background()
	orders, err := sim.NewOrderService()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = orders.Close(context.Background()) })
	wh, err := sim.NewWarehouse()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wh.Close(context.Background()) })
	clk := &clock{t: time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)}
	m := e.build(t, map[string]string{"inventory.reservation_ttl": "15m", "inventory.recheck_after": "1m",
		"inventory.max_checks": "2", "inventory.order_url": orders.URL(), "inventory.warehouse_url": wh.URL()},
		WithClock(clk.now))
	seed(t, m, "WH1", "SKU1", 100)
	ids := map[string]int64{}
	for _, line := range []string{"shipped-1", "cancel-1", "unknown-1", "paid-1", "race-1"} {
		r, err := m.Reserve(ctx, ReserveRequest{OrderLine: line, Warehouse: "WH1", SKU: "SKU1", Qty: 1})
		if err != nil {
			t.Fatal(err)
		}
		ids[line] = r.ReservationID
	}
	orders.Set("shipped-1", "shipped")
	wh.Set(ids["shipped-1"], "shipped")
	orders.Set("cancel-1", "cancelled")
	orders.Set("paid-1", "paid")
	wh.Set(ids["paid-1"], "picking")
	orders.Set("race-1", "cancelled")
	// unknown-1 is not known to the order service: 404, unknown.
	// race-1 is confirmed by the warehouse while the check asks about it.
	orders.SetHook(func(line string) {
		if line == "race-1" {
			if _, err := m.Confirm(ctx, ids["race-1"], ConfirmRequest{Receipt: "SHIP-R", StockVersion: 5}); err != nil {
				t.Errorf("confirm during the check: %v", err)
			}
		}
	})

	if rep, err := m.SweepTimeouts(ctx, 100); err != nil || rep.Checked != 0 {
		t.Fatalf("before the time: %+v %v; want nothing checked", rep, err)
	}
	clk.add(16 * time.Minute)
	rep, err := m.SweepTimeouts(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	state := func(line string) domain.State {
		r, err := m.st.GetReservation(ctx, e.DB, ids[line])
		if err != nil {
			t.Fatal(err)
		}
		return r.State
	}
	for line, want := range map[string]domain.State{"shipped-1": domain.Reserved, "cancel-1": domain.Released,
		"unknown-1": domain.Reserved, "paid-1": domain.Reserved, "race-1": domain.Confirmed} {
		if got := state(line); got != want {
			t.Errorf("%s is %s; want %s", line, got, want)
		}
	}
	if rep.Released != 1 || rep.Kept != 2 || rep.Delayed != 1 {
		t.Fatalf("sweep %+v; want 1 released, 2 kept, 1 delayed", rep)
	}
	// The release booked one ledger row with the answers as its reason.
	var reason string
	if err := e.DB.QueryRow(ctx, "SELECT reason FROM inv_ledger WHERE movement = 'release'").Scan(&reason); err != nil {
		t.Fatal(err)
	}
	if reason != `timeout check: order "cancelled", warehouse "none"` {
		t.Fatalf("release reason %q", reason)
	}
	r, _ := m.st.GetReservation(ctx, e.DB, ids["unknown-1"])
	if r.Checks != 1 || !r.CheckAfter.Equal(clk.now().Add(time.Minute)) {
		t.Fatalf("unknown-1 after the sweep: checks %d, next %s; want 1 and a minute later", r.Checks, r.CheckAfter)
	}
	// The order service fails: every answer is unknown, nothing released;
	// unknown-1 reaches its budget and becomes a ticket.
	orders.SetMode(sim.Fail)
	clk.add(2 * time.Minute)
	rep, err = m.SweepTimeouts(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Released != 0 || rep.Manual != 1 || rep.Delayed != 2 {
		t.Fatalf("sweep with the order service failing: %+v; want 1 manual, 2 delayed, none released", rep)
	}
	if n := e.Count(t, "SELECT count(*) FROM inv_conflict WHERE kind = 'timeout_unknown' AND state = 'open'"); n != 1 {
		t.Fatalf("%d manual tickets; want 1", n)
	}
	if n := e.Count(t, "SELECT count(*) FROM inv_ledger WHERE movement = 'release'"); n != 1 {
		t.Fatalf("%d releases booked; want 1", n)
	}
}
