package keel_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// seenWorker records which jobs ran, by their args, as a customer of the
// queue would count them.
type seenWorker struct {
	mu   sync.Mutex
	seen map[int]int
}

func (w *seenWorker) Work(ctx context.Context, job *keel.Job[noopArgs]) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen == nil {
		w.seen = map[int]int{}
	}
	w.seen[job.Args.N]++
	return nil
}

func (w *seenWorker) count() (distinct, runs int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.seen {
		runs += n
	}
	return len(w.seen), runs
}

func TestInsertManyFast(t *testing.T) {
	both(t, testInsertManyFast[pgx.Tx], testInsertManyFast[*sql.Tx])
}

// testInsertManyFast: jobs bulk-inserted by one client run on another whose
// only way to learn of them is the insert notification (its poll is an
// hour); due jobs run once each, later ones wait as scheduled with what was
// asked of them; bad input and a rolled-back transaction write nothing.
func testInsertManyFast[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	w := &seenWorker{}
	ws := keel.NewWorkers()
	keel.AddWorker[noopArgs](ws, w)
	cfg := fastConfig(ws)
	cfg.FetchPollInterval = time.Hour
	startClient(t, d, cfg)
	producer := startClient(t, d, &keel.Config{})

	later := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	var params []keel.InsertParams
	for i := range 300 {
		opts := &keel.InsertOpts{Priority: 1 + i%4}
		if i%3 == 0 {
			opts.RunAt = later
		}
		if i%5 == 0 {
			opts.FlowKey = "tenant-a"
			opts.Metadata = map[string]any{"source": "bulk"}
		}
		params = append(params, keel.InsertParams{Args: noopArgs{N: i}, Opts: opts})
	}
	n, err := producer.InsertManyFast(ctx, params)
	if err != nil || n != 300 {
		t.Fatalf("InsertManyFast = %d, %v; want 300", n, err)
	}
	waitFor(t, 20*time.Second, "the 200 due jobs to run", func() bool {
		distinct, _ := w.count()
		return distinct == 200
	})
	scheduled, err := producer.JobList(ctx, &keel.JobListParams{States: []keeltype.JobState{keeltype.JobStateScheduled}, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(scheduled) != 100 {
		t.Fatalf("scheduled jobs = %d, want 100", len(scheduled))
	}
	for _, j := range scheduled {
		var a noopArgs
		if err := json.Unmarshal(j.Args, &a); err != nil || a.N%3 != 0 {
			t.Fatalf("scheduled job %d has args %s, want a multiple of 3", j.ID, j.Args)
		}
		if !j.RunAt.Equal(later) || j.Priority != 1+a.N%4 || j.Kind != "test.noop" || j.Queue != keel.DefaultQueue {
			t.Fatalf("job %d stored as run_at %v priority %d kind %q queue %q; want %v, %d", j.ID, j.RunAt, j.Priority, j.Kind, j.Queue, later, 1+a.N%4)
		}
		if a.N%5 == 0 && (j.FlowKey != "tenant-a" || string(j.Metadata) != `{"source": "bulk"}` && string(j.Metadata) != `{"source":"bulk"}`) {
			t.Fatalf("job %d: flow key %q metadata %s", j.ID, j.FlowKey, j.Metadata)
		}
	}
	w.mu.Lock()
	for i := range 300 {
		if want := map[bool]int{true: 0, false: 1}[i%3 == 0]; w.seen[i] != want {
			w.mu.Unlock()
			t.Fatalf("job N=%d ran %d times, want %d", i, w.seen[i], want)
		}
	}
	w.mu.Unlock()

	all := func() int {
		rows, err := producer.JobList(ctx, &keel.JobListParams{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return len(rows)
	}
	before := all()
	bad := []keel.InsertParams{{Args: noopArgs{N: 1000}}, {Args: noopArgs{N: 1001}, Opts: &keel.InsertOpts{IdempotencyKey: "k"}}}
	if _, err := producer.InsertManyFast(ctx, bad); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("an idempotency key must be refused, got %v", err)
	}
	if _, err := producer.InsertManyFast(ctx, []keel.InsertParams{{Args: noopArgs{N: 1002}, Opts: &keel.InsertOpts{Priority: 9}}}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("priority 9 must be refused, got %v", err)
	}
	if got := all(); got != before {
		t.Fatalf("refused input wrote jobs: %d → %d", before, got)
	}

	// Inside a transaction: nothing on rollback, every job after commit.
	inTx := func(commit bool, from int) {
		etx, err := d.Executor().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = etx.Rollback(ctx) }()
		n, err := producer.InsertManyFastTx(ctx, d.UnwrapTx(etx), []keel.InsertParams{
			{Args: noopArgs{N: from}}, {Args: noopArgs{N: from + 1}}})
		if err != nil || n != 2 {
			t.Fatalf("InsertManyFastTx = %d, %v", n, err)
		}
		if commit {
			if err := etx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	inTx(false, 2000)
	if got := all(); got != before {
		t.Fatalf("rolled-back bulk insert left jobs: %d → %d", before, got)
	}
	inTx(true, 3000)
	if got := all(); got != before+2 {
		t.Fatalf("committed bulk insert: %d jobs, want %d", got, before+2)
	}
	if d.Dialect() != "postgres" {
		// SQLite's notifications are in-process and cannot wait for a
		// caller's commit: the wake-up may come first, and the poll (an
		// hour here) is what finds the jobs. PostgreSQL sends it in the
		// transaction, delivered on commit.
		return
	}
	waitFor(t, 20*time.Second, "the committed jobs to run", func() bool {
		distinct, _ := w.count()
		return distinct == 202
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen[2000] != 0 || w.seen[3000] != 1 || w.seen[3001] != 1 {
		t.Fatalf("runs: rolled back %d, committed %d and %d", w.seen[2000], w.seen[3000], w.seen[3001])
	}
}
