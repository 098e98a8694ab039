package inventory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
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
			e := pgEnv(b)
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
	e := pgEnv(b)
	m := e.build(b, map[string]string{"inventory.latency_budget": "1m", "inventory.pool_wait_budget": "1m"})
	seed(b, m, "WH1", "S0", 0)
	ctx := context.Background()
	// Bulk set-up (the benchmark measures reservations, not receipts).
	if _, err := e.db.Exec(ctx, `INSERT INTO inv_sku (id, name_zh, name_en, unit_value_minor, currency, created_at)
		SELECT 'S' || g, 'S' || g, 'S' || g, 100, 'CNY', now() FROM generate_series(1, $1::integer) g`, skus); err != nil {
		b.Fatal(err)
	}
	if _, err := e.db.Exec(ctx, `INSERT INTO inv_stock (warehouse_id, sku_id, on_hand, available, reserved, sold, returned, version, updated_at)
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
