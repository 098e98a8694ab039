package keel_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
)

// heldKeys is a set of flow keys a test grows at run time.
type heldKeys struct {
	mu   sync.Mutex
	keys []string
}

func (h *heldKeys) get() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.keys...)
}

func (h *heldKeys) add(k string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.keys = append(h.keys, k)
}

type heldWorker struct {
	client string
	ran    chan [2]string // (client, flow key)
}

func (w *heldWorker) Work(ctx context.Context, job *keel.Job[keyArgs]) error {
	w.ran <- [2]string{w.client, job.FlowKey}
	return nil
}

// TestQueueFlowKeys: a client restricted to a set of flow keys claims only
// their jobs; an empty set claims nothing; a key added later is fetched at
// once after WakeQueue, well before the poll interval.
func TestQueueFlowKeys(t *testing.T) {
	both(t, testQueueFlowKeys[pgx.Tx], testQueueFlowKeys[*sql.Tx])
}

func testQueueFlowKeys[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	ran := make(chan [2]string, 100)
	holders := map[string]*heldKeys{"A": {keys: []string{"app-a"}}, "B": {}}
	clients := map[string]*keel.Client[TTx]{}
	for _, name := range []string{"A", "B"} {
		workers := keel.NewWorkers()
		keel.AddWorker(workers, &heldWorker{client: name, ran: ran})
		cfg := fastConfig(workers)
		cfg.FetchPollInterval = time.Hour // only wake-ups fetch
		cfg.Queues = map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 5, FlowKeys: holders[name].get}}
		clients[name] = startClient(t, d, cfg)
	}
	for _, k := range []string{"app-a", "app-b", "app-a", "app-b"} {
		if _, err := clients["A"].Insert(ctx, keyArgs{}, &keel.InsertOpts{FlowKey: k}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		got := recv(t, ran)
		if got != [2]string{"A", "app-a"} {
			t.Fatalf("ran %v; want only client A on app-a", got)
		}
	}
	holders["B"].add("app-b")
	clients["B"].WakeQueue(keel.DefaultQueue)
	for range 2 {
		if got := recv(t, ran); got != [2]string{"B", "app-b"} {
			t.Fatalf("ran %v; want client B on app-b", got)
		}
	}
}

func recv(t *testing.T, ch chan [2]string) [2]string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a job to run")
	}
	return [2]string{}
}

// TestInsertTxWakesOnCommit (PostgreSQL): a job inserted inside a caller's
// transaction wakes another instance's fetcher when the transaction
// commits. The notification travels in the insert's own round trip and
// transaction, so it cannot arrive before the row is visible; the worker
// polls only hourly here, so the job starting proves the wake-up worked.
func TestInsertTxWakesOnCommit(t *testing.T) {
	d := testdb.NewPostgres(t)
	ctx := context.Background()
	ran := make(chan [2]string, 1)
	workers := keel.NewWorkers()
	keel.AddWorker(workers, &heldWorker{client: "worker", ran: ran})
	cfg := fastConfig(workers)
	cfg.FetchPollInterval = time.Hour
	startClient(t, d, cfg)
	inserter := startClient(t, d, &keel.Config{})
	tx, err := d.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inserter.InsertTx(ctx, tx, keyArgs{}, &keel.InsertOpts{FlowKey: "k"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
		t.Fatal("job ran before its transaction committed")
	case <-time.After(50 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, ran)
}

// TestHeldKeysBeyondOneClaim: one claim serves at most 16 flow keys; when a
// client holds more keys than that, one wake-up must still reach the jobs of
// every key, not only the 16 listed first. With the poll an hour away, only
// fetching on through the rotation can run all 40 jobs (one per key, so no
// key fills its share and signals a backlog by itself).
func TestHeldKeysBeyondOneClaim(t *testing.T) {
	both(t, testHeldKeysBeyondOneClaim[pgx.Tx], testHeldKeysBeyondOneClaim[*sql.Tx])
}

func testHeldKeysBeyondOneClaim[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	const keys = 40
	held := &heldKeys{}
	params := make([]keel.InsertParams, keys)
	for i := range keys {
		k := fmt.Sprintf("app-%02d", i)
		held.add(k)
		params[i] = keel.InsertParams{Args: keyArgs{}, Opts: &keel.InsertOpts{FlowKey: k}}
	}
	ran := make(chan [2]string, keys)
	workers := keel.NewWorkers()
	keel.AddWorker(workers, &heldWorker{client: "A", ran: ran})
	cfg := fastConfig(workers)
	cfg.FetchPollInterval = time.Hour
	cfg.Queues = map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 64, FlowKeys: held.get}}
	c := startClient(t, d, cfg)
	if _, err := c.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	// A job may run twice (its lease ran out on a starved machine and it
	// was claimed again): what counts is that every key's job ran.
	seen := map[string]bool{}
	for len(seen) < keys {
		seen[recv(t, ran)[1]] = true
	}
}
