package keel_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

type gateArgs struct{}

func (gateArgs) Kind() string { return "test.gate" }

// gateWorker reports each start and holds the job until release closes.
type gateWorker struct {
	started chan int64
	release chan struct{}
}

func (w *gateWorker) Work(ctx context.Context, job *keel.Job[gateArgs]) error {
	w.started <- job.ID
	<-w.release
	return nil
}

// TestStartOnInsert: by default a job the client inserts into its idle
// queue comes back from Insert already running under this client's lease
// (a usual insert returns it available), and its worker starts it; with
// every slot busy, a paused queue, or an idempotency key it is inserted
// available and claimed the usual way.
func TestStartOnInsert(t *testing.T) {
	both(t, testStartOnInsert[pgx.Tx], testStartOnInsert[*sql.Tx])
}

// startGateClient starts a client with one worker slot in the default
// queue and a gateWorker, after edit has adjusted its config; the worker
// is released when the test ends.
func startGateClient[TTx any](t *testing.T, d keeldriver.Driver[TTx], edit func(*keel.Config)) (*keel.Client[TTx], *gateWorker) {
	w := &gateWorker{started: make(chan int64, 10), release: make(chan struct{})}
	workers := keel.NewWorkers()
	keel.AddWorker(workers, w)
	cfg := fastConfig(workers)
	cfg.Queues = map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 1}}
	edit(cfg)
	c := startClient(t, d, cfg)
	t.Cleanup(func() { close(w.release) })
	return c, w
}

func testStartOnInsert[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	c, w := startGateClient(t, d, func(cfg *keel.Config) {
		cfg.ID = "a"
		cfg.FetchPollInterval = time.Hour
	})
	// The queue is idle here once the start-up polls have settled (a poll
	// that found no room records a possible backlog, which the next fetch
	// clears); until then an insert takes the usual path, and its job is
	// claimed and worked as ever.
	var res *keel.InsertResult
	waitFor(t, 30*time.Second, "an insert that starts its job", func() bool {
		r, err := c.Insert(ctx, gateArgs{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Job.State == keeltype.JobStateRunning {
			res = r
			return true
		}
		if got := <-w.started; got != r.Job.ID {
			t.Fatalf("started %d, want %d", got, r.Job.ID)
		}
		w.release <- struct{}{}
		return false
	})
	if j := res.Job; j.LeaseOwner != "a" || j.Fence != 1 || j.Attempt != 1 {
		t.Fatalf("Insert returned %+v, want it running under a's lease", j)
	}
	if got := <-w.started; got != res.Job.ID {
		t.Fatalf("started %d, want %d", got, res.Job.ID)
	}

	// The one slot is busy: the next job waits, available, and is claimed
	// when the slot frees.
	second, err := c.Insert(ctx, gateArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if second.Job.State != keeltype.JobStateAvailable {
		t.Fatalf("with no free slot Insert returned %s", second.Job.State)
	}
	// An idempotency key is decided at claim time: the usual path.
	keyed, err := c.Insert(ctx, gateArgs{}, &keel.InsertOpts{IdempotencyKey: "k"})
	if err != nil || keyed.Job.State != keeltype.JobStateAvailable {
		t.Fatalf("keyed insert: %+v %v", keyed, err)
	}
	// The two are claimed together once the slot frees, one started and
	// one fetched ahead, in either order.
	w.release <- struct{}{} // the first ends
	got := map[int64]bool{<-w.started: true}
	w.release <- struct{}{}
	got[<-w.started] = true
	w.release <- struct{}{}
	if !got[second.Job.ID] || !got[keyed.Job.ID] {
		t.Fatalf("started %v, want the waiting jobs %d and %d", got, second.Job.ID, keyed.Job.ID)
	}
	waitFor(t, 30*time.Second, "the three jobs completed", func() bool {
		return jobState(t, c, keyed.Job.ID).State == keeltype.JobStateCompleted &&
			jobState(t, c, res.Job.ID).State == keeltype.JobStateCompleted
	})

	// A paused queue takes the insert available and starts nothing.
	if _, err := c.QueuePause(ctx, keel.DefaultQueue, "test"); err != nil {
		t.Fatal(err)
	}
	paused, err := c.Insert(ctx, gateArgs{}, nil)
	if err != nil || paused.Job.State != keeltype.JobStateAvailable {
		t.Fatalf("insert into a paused queue: %+v %v", paused, err)
	}
	if _, err := c.QueueResume(ctx, keel.DefaultQueue, "test"); err != nil {
		t.Fatal(err)
	}
	c.WakeQueue(keel.DefaultQueue)
	if got := <-w.started; got != paused.Job.ID {
		t.Fatalf("started %d after resume, want %d", got, paused.Job.ID)
	}
	w.release <- struct{}{}
}

// TestDisableStartOnInsert: with Config.DisableStartOnInsert every insert
// stores its job available, idle queue or not, and the job is claimed and
// worked the usual way.
func TestDisableStartOnInsert(t *testing.T) {
	both(t, testDisableStartOnInsert[pgx.Tx], testDisableStartOnInsert[*sql.Tx])
}

func testDisableStartOnInsert[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	c, w := startGateClient(t, d, func(cfg *keel.Config) { cfg.DisableStartOnInsert = true })
	for i := 0; i < 10; i++ {
		r, err := c.Insert(ctx, gateArgs{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Job.State != keeltype.JobStateAvailable || r.Job.Fence != 0 {
			t.Fatalf("insert %d returned %s, fence %d; want available, fence 0", i, r.Job.State, r.Job.Fence)
		}
		if got := <-w.started; got != r.Job.ID {
			t.Fatalf("started %d, want %d", got, r.Job.ID)
		}
		w.release <- struct{}{}
		waitFor(t, 30*time.Second, "the job completed", func() bool {
			return jobState(t, c, r.Job.ID).State == keeltype.JobStateCompleted
		})
	}
}
