package inventory

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/jetstream"
	"github.com/keelwork/keel/keelevents/jetstream/jstest"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/inventory/domain"
)

// The benchmarks run on PostgreSQL (the production database): a single
// hot SKU through the plain row-lock path and through coalescing, and
// reservations spread over 10,000 SKUs, each by 256 concurrent callers (a
// flash sale's buyers: coalescing needs callers waiting to batch them).
// Each reports reservations/s, and requests per batch when coalescing.
//
//	go test -run '^$' -bench BenchmarkInventory -benchtime 20000x ./modules/inventory/

func BenchmarkInventoryHotSKU(b *testing.B) {
	for _, co := range []string{"false", "true"} {
		b.Run("coalesce="+co, func(b *testing.B) {
			e := newTenv(moduletest.Postgres(b, testLines))
			m := e.build(b, map[string]string{"inventory.coalesce": co, "inventory.latency_budget": "1m", "inventory.pool_wait_budget": "1m"})
			seed(b, m, "WH1", "HOT", 0)
			if _, err := m.Receive(context.Background(), "bench", "WH1", "HOT", int64(b.N)+1); err != nil {
				b.Fatal(err)
			}
			runReservations(b, m, func(int) string { return "HOT" })
		})
	}
}

func BenchmarkInventorySpread(b *testing.B) {
	const skus = 10_000
	e := newTenv(moduletest.Postgres(b, testLines))
	set := map[string]string{"inventory.latency_budget": "1m", "inventory.pool_wait_budget": "1m"}
	if l := os.Getenv("KEEL_INVENTORY_LANES"); l != "" {
		set["inventory.coalesce_lanes"] = l
	}
	m := e.build(b, set)
	seed(b, m, "WH1", "S0", 0)
	ctx := context.Background()
	// Bulk set-up (the benchmark measures reservations, not receipts).
	if _, err := e.DB.Exec(ctx, `INSERT INTO inv_sku (id, name_zh, name_en, unit_value_minor, currency, created_at)
		SELECT 'S' || g, 'S' || g, 'S' || g, 100, 'CNY', now() FROM generate_series(1, $1::integer) g`, skus); err != nil {
		b.Fatal(err)
	}
	if _, err := e.DB.Exec(ctx, `INSERT INTO inv_stock (warehouse_id, sku_id, on_hand, available, reserved, sold, returned, version, updated_at)
		SELECT 'WH1', 'S' || g, 1000000, 1000000, 0, 0, 0, 0, now() FROM generate_series(1, $1::integer) g`, skus); err != nil {
		b.Fatal(err)
	}
	runReservations(b, m, func(int) string { return fmt.Sprintf("S%d", 1+rand.IntN(skus)) })
}

// benchCallers is how many callers reserve at once.
const benchCallers = 256

func runReservations[TTx any](b *testing.B, m *Module[TTx], sku func(int) string) {
	var seq, failed atomic.Int64
	b.SetParallelism(max(1, benchCallers/runtime.GOMAXPROCS(0))) // × GOMAXPROCS concurrent callers
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := seq.Add(1)
			res, err := m.Reserve(context.Background(), ReserveRequest{OrderLine: fmt.Sprintf("B%d", n), Warehouse: "WH1", SKU: sku(int(n)), Qty: 1})
			if err != nil || res.Outcome != OutcomeApplied {
				failed.Add(1)
			}
		}
	})
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "reservations/s")
	if failed.Load() > 0 {
		b.Fatalf("%d reservations failed", failed.Load())
	}
	if cs := m.Coalescing(); cs.Batches > 0 {
		b.ReportMetric(float64(cs.Requests)/float64(cs.Batches), "requests/batch")
	}
}

// BenchmarkInventoryFulfilmentBacklog drains a fulfilment backlog (the
// seed's 数据演绎 7: 2,400,000 events; default 240,000, scaled by 1/10,
// KEEL_INVENTORY_BACKLOG=2400000 for the full figure) on PostgreSQL with
// the watermark at its configured budgets (KEEL_INVENTORY_BUDGET sets the
// reservation latency budget, default the module's 500ms), while 4 callers
// keep reserving, each every 100 ms. The backlog is confirmations over 1,000 SKUs, already in
// the outbox when the consumers start. It reports the drain rate
// (pick tasks/s), the reservations admitted and refused meanwhile, the
// share of the admission samples (every 100 ms) that were over the
// watermark, and how far the low-value consumers (search projection,
// statistics) had come when fulfilment finished.
//
// The bus is JetStream (KEEL_TEST_NATS_URL), the one a deployment carries
// a backlog on; KEEL_INVENTORY_BUS=db runs it on the in-database bus.
//
//	go test -run '^$' -bench BenchmarkInventoryFulfilmentBacklog -benchtime 1x -timeout 2h ./modules/inventory/
func BenchmarkInventoryFulfilmentBacklog(b *testing.B) {
	total := 240_000
	if s := os.Getenv("KEEL_INVENTORY_BACKLOG"); s != "" {
		total, _ = strconv.Atoi(s)
	}
	budget := cmp.Or(os.Getenv("KEEL_INVENTORY_BUDGET"), "500ms")
	const skus, chunk = 1000, 10_000
	const base = int64(1_000_000_000_000) // synthetic ids, clear of the live reservations'
	for range b.N {
		e := newTenv(moduletest.Postgres(b, testLines))
		if os.Getenv("KEEL_INVENTORY_BUS") != "db" {
			ns := fmt.Sprintf("invb%d", time.Now().UnixNano()%1_000_000_000)
			bus, err := jetstream.New(context.Background(), jetstream.Config{URL: jstest.ServerURL(b), Partitions: 8, Namespace: ns,
				MaxAge: time.Hour, InactiveThreshold: 5 * time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = bus.Close() })
			e.bus = bus
		}
		m := e.build(b, map[string]string{"inventory.latency_budget": budget, "inventory.pool_wait_budget": "200ms",
			"inventory.coalesce": "true"})
		seed(b, m, "WH1", "R1", 0)
		ctx := context.Background()
		for k := range 20 {
			if _, err := m.Receive(ctx, fmt.Sprintf("bench-%d", k), "WH1", "R1", 1_000_000); err != nil {
				b.Fatal(err)
			}
		}
		// The backlog: confirmations spread over the SKUs, each SKU's
		// versions consecutive (the projection sees no gap).
		for from := 0; from < total; from += chunk {
			evs := make([]keelevents.Event, 0, chunk)
			for i := from; i < min(from+chunk, total); i++ {
				sku := fmt.Sprintf("F%d", i%skus)
				ev := StockEvent{LedgerID: base + int64(i), Warehouse: "WH1", SKU: sku, Movement: domain.MoveConfirm, Qty: 1,
					ReservationID: base + int64(i), OrderLine: fmt.Sprintf("F%d-1", i), StockVersion: int64(i/skus + 1)}
				p, _ := json.Marshal(ev)
				evs = append(evs, keelevents.Event{Topic: Topic, ID: strconv.FormatInt(ev.LedgerID, 10), Key: StockKey("WH1", sku),
					Type: "inventory.confirm", Payload: p})
			}
			if err := e.DB.InTx(ctx, func(tx keelsql.Tx[pgx.Tx]) error { return e.ev.EmitManyTx(ctx, tx, evs) }); err != nil {
				b.Fatal(err)
			}
		}
		// The outbox is not analyzed: the relay's fetch is planned as an
		// ordered index scan per partition whatever the statistics (before
		// it was, the first full run drained 6,000 events in 8 minutes,
		// planned against the empty table's statistics, until the table was
		// analyzed by hand).
		b.ResetTimer()
		start := time.Now()
		e.start(b)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var admitted, refused atomic.Int64
		for c := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					time.Sleep(100 * time.Millisecond) // a steady trickle, not a flash sale: the backlog is the load
					_, err := m.Reserve(ctx, ReserveRequest{OrderLine: fmt.Sprintf("L%d-%d", c, n), Warehouse: "WH1", SKU: "R1", Qty: 1})
					switch {
					case err == nil:
						admitted.Add(1)
					case errors.Is(err, ErrBusy):
						refused.Add(1)
						time.Sleep(100 * time.Millisecond) // a client honouring Retry-After, shortened
					default:
						b.Error(err)
						return
					}
				}
			}()
		}
		var samples, over int
		var maxLatency time.Duration
		tick := time.NewTicker(100 * time.Millisecond)
		last := time.Now()
		var printed time.Duration
		for done := false; !done; {
			<-tick.C
			s := m.Admission()
			samples++
			if s.Over {
				over++
			}
			maxLatency = max(maxLatency, s.Latency)
			if time.Since(last) >= time.Second {
				last = time.Now()
				// The id's high-water mark, an index lookup: counting 2,400,000
				// rows every second took CPU from the drain it measures. Ids
				// can skip (a conflicting insert uses one), so the end is
				// confirmed by counting.
				picks := e.Count(b, "SELECT COALESCE(max(id), 0) FROM inv_pick_task")
				if picks >= int64(total) {
					picks = e.Count(b, "SELECT count(*) FROM inv_pick_task")
					done = picks >= int64(total)
				}
				if el := time.Since(start); el-printed >= 30*time.Second {
					printed = el
					// Progress of a long run (the full backlog takes many minutes).
					fmt.Fprintf(os.Stderr, "%s: %d picks (%.0f/s), admission over %v, latency %s\n", el.Round(time.Second), picks,
						float64(picks)/el.Seconds(), s.Over, s.Latency.Round(time.Millisecond))
				}
			}
		}
		took := time.Since(start)
		tick.Stop()
		close(stop)
		wg.Wait()
		b.StopTimer()
		if n := e.Count(b, "SELECT count(*) FROM inv_pick_task"); n != int64(total) {
			b.Fatalf("%d pick tasks for %d confirmations", n, total)
		}
		stats := e.Count(b, "SELECT COALESCE(sum(events), 0) FROM inv_stats WHERE movement = 'confirm'")
		b.ReportMetric(float64(total)/took.Seconds(), "picks/s")
		b.ReportMetric(float64(admitted.Load())/took.Seconds(), "reservations/s")
		b.ReportMetric(100*float64(over)/float64(samples), "%over")
		b.Logf("%d confirmations drained in %s (%.0f/s), budget %s: %d reservations admitted, %d refused; over the watermark in %d of %d samples (peak average latency %s); %d paused low-value deliveries; statistics had counted %d confirmations",
			total, took.Round(time.Millisecond), float64(total)/took.Seconds(), budget, admitted.Load(), refused.Load(), over, samples,
			maxLatency.Round(time.Millisecond), m.pausedDeliveries.Load(), stats)
	}
}
