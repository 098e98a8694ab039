package keel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
)

// syntheticSource emits n subjects spread over 50 keys without a table: the
// benchmark measures Keel's side of materialization (chunked set-based
// inserts with the counter triggers), not a module's query.
type syntheticSource struct{ n int }

func (syntheticSource) Kind() string { return "bench.requeue" }

func (s syntheticSource) Preview(context.Context, deliveryFilter, time.Time) (*keel.BatchPreview, error) {
	return &keel.BatchPreview{Hits: int64(s.n), Eligible: int64(s.n), DistinctKeys: 50}, nil
}

func (s syntheticSource) Subjects(_ context.Context, _ deliveryFilter, _ time.Time, emit func(string, string, keel.JobArgs) error) error {
	for i := range s.n {
		id := fmt.Sprintf("d%07d", i)
		if err := emit(id, fmt.Sprintf("app:%d", i%50), requeueArgs{DeliveryID: id, App: fmt.Sprint(i % 50)}); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkMaterialize100k creates a batch of 100,000 items on PostgreSQL
// (preview, token, create, materialize in 5,000-item transactions, start)
// and reports the time per batch and the item rate.
func BenchmarkMaterialize100k(b *testing.B) {
	const n = 100_000
	ctx := keel.WithActor(context.Background(), "user:bench")
	for range b.N {
		b.StopTimer()
		d := testdb.NewPostgres(b)
		cfg := batchConfig(nil)
		cfg.Queues, cfg.DisableMaintenance = nil, true
		c, err := keel.NewClient(d, cfg)
		if err != nil {
			b.Fatal(err)
		}
		src := syntheticSource{n: n}
		b.StartTimer()
		start := time.Now()
		pv, err := keel.BatchPreviewOf(ctx, c, src, deliveryFilter{})
		if err != nil {
			b.Fatal(err)
		}
		batch, err := keel.BatchCreate(ctx, c, src, pv.Token, keel.BatchOpts{Reason: "benchmark materialization"})
		if err != nil {
			b.Fatal(err)
		}
		el := time.Since(start)
		b.StopTimer()
		if batch.Total != n || batch.State != "running" {
			b.Fatalf("batch: total %d state %s", batch.Total, batch.State)
		}
		b.ReportMetric(el.Seconds(), "s/100k")
		b.ReportMetric(float64(n)/el.Seconds(), "items/s")
		b.Logf("materialized %d items in %s", n, el)
	}
}

// BenchmarkNonBatchInsertTriggerCost inserts and finishes 20,000 jobs that
// belong to no batch, with the batch counter triggers enabled and disabled:
// their WHEN clauses keep the function from running, so the two should not
// differ beyond noise.
func BenchmarkNonBatchInsertTriggerCost(b *testing.B) {
	for _, mode := range []string{"triggers", "no_triggers"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			d := testdb.NewPostgres(b)
			if mode == "no_triggers" {
				if _, err := d.Pool().Exec(ctx, "ALTER TABLE keel_job DISABLE TRIGGER USER"); err != nil {
					b.Fatal(err)
				}
			}
			c, err := keel.NewClient(d, &keel.Config{DisableMaintenance: true})
			if err != nil {
				b.Fatal(err)
			}
			params := make([]keel.InsertParams, 1000)
			for i := range params {
				params[i] = keel.InsertParams{Args: noopArgs{N: i}}
			}
			b.ResetTimer()
			for range b.N {
				for range 20 {
					if _, err := c.InsertMany(ctx, params); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := d.Pool().Exec(ctx, "UPDATE keel_job SET state = 'completed', finalized_at = now() WHERE state = 'available'"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
