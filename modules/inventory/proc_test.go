package inventory

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsqlite"
	"github.com/keelwork/keel/module"
)

// The multi-process tests re-execute the test binary as Keel processes on
// the test's database (see crash_test.go). helperEnv names the child's
// role:
//
//   - "oversell": reserve the given order lines concurrently when told
//     to ("go" on stdin), print "done applied=N insufficient=N errors=N"
//     and stop;
//   - "work": reserve, then confirm or release, every order line of the
//     set, in a random order, pass after pass, printing "pass errors=N"
//     after each, until killed (no consumers: a reservation-only process);
//   - "consume": run the inventory's consumers (and the relay) until
//     killed.
const (
	helperEnv    = "INVENTORY_TEST_HELPER"
	helperDriver = "INVENTORY_HELPER_DRIVER"
	helperDSN    = "INVENTORY_HELPER_DSN"
	helperLines  = "INVENTORY_HELPER_LINES" // first,count of the order lines
	helperSKUs   = "INVENTORY_HELPER_SKUS"  // SKUs the lines spread over
)

func TestMain(m *testing.M) {
	if role := os.Getenv(helperEnv); role != "" {
		if err := helperMain(role); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func helperMain(role string) error {
	ctx := context.Background()
	switch os.Getenv(helperDriver) {
	case "postgres":
		d, err := keelpgx.Open(ctx, os.Getenv(helperDSN), nil)
		if err != nil {
			return err
		}
		defer d.Close()
		return runHelper[pgx.Tx](ctx, role, d, keelsql.Pgx(d.Pool()))
	case "sqlite":
		d, err := keelsqlite.Open(os.Getenv(helperDSN), nil)
		if err != nil {
			return err
		}
		defer d.Close()
		return runHelper[*sql.Tx](ctx, role, d, keelsql.SQLite(d.DB()))
	}
	return fmt.Errorf("unknown %s %q", helperDriver, os.Getenv(helperDriver))
}

// helperLine is order line i of the tests' set and its SKU.
func helperLine(i, skus int) (line, sku string) {
	return fmt.Sprintf("P%d-1", i), fmt.Sprintf("C%d", i%skus)
}

func runHelper[TTx any](ctx context.Context, role string, drv keeldriver.Driver[TTx], db keelsql.DB[TTx]) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	bus, err := keelevents.NewDatabaseBus(db, &keelevents.DatabaseBusConfig{Logger: logger})
	if err != nil {
		return err
	}
	defer bus.Close()
	ev, err := keelevents.New(db, bus, &keelevents.Config{Partitions: 8, LeaseTTL: 2 * time.Second, StatsInterval: time.Hour, Logger: logger})
	if err != nil {
		return err
	}
	rc, err := keelrecon.New(db, nil)
	if err != nil {
		return err
	}
	// Generous budgets: these processes share a loaded machine, and a 429
	// is not what they test.
	settings := map[string]string{"inventory.latency_budget": "1m", "inventory.pool_wait_budget": "1m"}
	opts := []Option{WithEvents(ev)}
	if role != "consume" {
		opts = append(opts, WithoutConsumers())
	}
	m, err := New(&module.Host[TTx]{DB: db, Logger: logger, Settings: settings, Recon: rc}, opts...)
	if err != nil {
		return err
	}
	cfg := &keel.Config{Logger: logger}
	for _, c := range []interface{ Configure(*keel.Config) error }{ev, m, rc} {
		if err := c.Configure(cfg); err != nil {
			return err
		}
	}
	client, err := keel.NewClient(drv, cfg)
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	if err := rc.Start(ctx, client); err != nil {
		return err
	}
	if err := ev.Start(ctx, client); err != nil {
		return err
	}
	if err := m.Start(ctx, client); err != nil {
		return err
	}
	first, n, _ := strings.Cut(os.Getenv(helperLines), ",")
	from, _ := strconv.Atoi(first)
	count, _ := strconv.Atoi(n)
	skus, _ := strconv.Atoi(os.Getenv(helperSKUs))
	skus = max(skus, 1)
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
	}
	say("ready")
	switch role {
	case "oversell":
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() && in.Text() != "go" {
		}
		var mu sync.Mutex
		outcomes := map[string]int{}
		var wg sync.WaitGroup
		for i := from; i < from+count; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				line, sku := helperLine(i, skus)
				res, err := m.Reserve(ctx, ReserveRequest{OrderLine: line, Warehouse: "WH1", SKU: sku, Qty: 1})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					fmt.Fprintln(os.Stderr, "reserve:", err)
					outcomes["error"]++
					return
				}
				outcomes[res.Outcome]++
			}()
		}
		wg.Wait()
		say("done applied=%d insufficient=%d errors=%d", outcomes[OutcomeApplied], outcomes[OutcomeInsufficient], outcomes["error"])
	case "work":
		for {
			errs := 0
			for _, i := range rand.Perm(count) {
				if err := helperWork(ctx, m, from+i, skus); err != nil {
					fmt.Fprintln(os.Stderr, "work:", err)
					errs++
				}
			}
			say("pass errors=%d", errs)
		}
	case "consume":
		select {}
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	stop, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return errors.Join(m.Stop(stop), ev.Stop(stop), client.Stop(stop))
}

// helperWork takes order line i to its end: reserved, then released
// (every third line: a cancel) or confirmed (the warehouse shipped it).
// Every step has its stable key, so a pass after a crash replays what
// was done and does what was not.
func helperWork[TTx any](ctx context.Context, m *Module[TTx], i, skus int) error {
	line, sku := helperLine(i, skus)
	res, err := m.Reserve(ctx, ReserveRequest{OrderLine: line, Warehouse: "WH1", SKU: sku, Qty: 1})
	if err != nil {
		return fmt.Errorf("reserving %s: %w", line, err)
	}
	if res.Outcome != OutcomeApplied {
		return nil
	}
	if i%3 == 0 {
		_, err = m.Release(ctx, res.ReservationID, ReleaseRequest{Reason: "order cancelled"})
	} else {
		_, err = m.Confirm(ctx, res.ReservationID, ConfirmRequest{Receipt: "R-" + line, StockVersion: res.StockVersion})
	}
	if err != nil {
		return fmt.Errorf("ending %s: %w", line, err)
	}
	return nil
}
