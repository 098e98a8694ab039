package keel_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// stoppingWorker holds every job until its module stops, then answers as
// a module does whose claimers were closed under it: keel.ErrStopping.
type stoppingWorker struct {
	stopped chan struct{}
	running atomic.Int64
}

func (w *stoppingWorker) Work(ctx context.Context, job *keel.Job[requeueArgs]) error {
	w.running.Add(1)
	<-w.stopped
	return fmt.Errorf("claiming record: %w", keel.ErrStopping)
}

// TestStopIsNotAFailure: a module stops under a running keyed batch whose
// keys auto-pause after 2 failures; its in-flight items answer
// keel.ErrStopping. They are handed back with no attempt, no error and no
// failure counted, no key pauses, and after a restart the batch finishes by
// itself with every item sent once.
func TestStopIsNotAFailure(t *testing.T) {
	both(t, testStopIsNotAFailure[pgx.Tx], testStopIsNotAFailure[*sql.Tx])
}

func testStopIsNotAFailure[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	tb := newDeliveryTable(t, d)
	src := deliverySource{tb: tb}
	for i := range 12 {
		tb.add(t, fmt.Sprintf("d%03d", i), []string{"a", "b"}[i%2], "failed", time.Now().Add(-time.Minute))
	}
	sw := &stoppingWorker{stopped: make(chan struct{})}
	workers := keel.NewWorkers()
	keel.AddWorker[requeueArgs](workers, sw)
	c1 := startClient(t, d, batchConfig(workers))
	b := createBatch(t, c1, src, deliveryFilter{}, keel.BatchOpts{Rate: 500, AutoPauseFailures: 2})
	waitFor(t, 15*time.Second, "items in flight on both keys", func() bool { return sw.running.Load() >= 4 })
	close(sw.stopped) // the module stops first, then the engine
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c1.Stop(stopCtx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	keys, err := c1.BatchKeys(ctx, b.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.PausedAt != nil || k.ConsecutiveFailures != 0 || k.LastError != "" {
			t.Errorf("key %s after a stop: paused %v, %d consecutive failures, last error %q",
				k.Key, k.PausedAt != nil, k.ConsecutiveFailures, k.LastError)
		}
	}
	for _, row := range allItems(t, c1, b.ID, keel.BatchItemsParams{}) {
		if len(row.Errors) != 0 || row.Attempt != 0 {
			t.Errorf("item %s after a stop: attempt %d, errors %+v", row.Subject, row.Attempt, row.Errors)
		}
	}

	gw := newGateway()
	workers2 := keel.NewWorkers()
	keel.AddWorker[requeueArgs](workers2, &requeueWorker{gw: gw})
	c2 := startClient(t, d, batchConfig(workers2))
	done := waitBatch(t, c2, b.ID, 20*time.Second, keeltype.BatchCompleted)
	if done.Counts[keeltype.OutcomeSuccess] != 12 {
		t.Fatalf("after restart: %v", done.Counts)
	}
	for id, n := range gw.snapshot() {
		if n != 1 {
			t.Errorf("delivery %s sent %d times", id, n)
		}
	}
}
