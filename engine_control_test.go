package keel_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

type waitCtxArgs struct{}

func (waitCtxArgs) Kind() string { return "test.wait-ctx" }

// TestCancelReachesRunningJobOnAnotherClient: the cancel is issued by a
// client that does not run the job; the owner's context is cancelled.
func TestCancelReachesRunningJobOnAnotherClient(t *testing.T) {
	both(t, testCancelReachesRunningJob[pgx.Tx], testCancelReachesRunningJob[*sql.Tx])
}

func testCancelReachesRunningJob[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	started := make(chan struct{})
	ws := keel.NewWorkers()
	keel.AddWorker(ws, keel.WorkerFunc[waitCtxArgs](func(ctx context.Context, job *keel.Job[waitCtxArgs]) error {
		close(started)
		<-ctx.Done()
		return context.Cause(ctx)
	}))
	cfg := fastConfig(ws)
	cfg.FetchPollInterval = time.Hour // prove the notification path, not polling
	owner := startClient(t, d, cfg)
	other := startClient(t, d, &keel.Config{})
	res, err := other.Insert(ctx, waitCtxArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	row, err := other.JobCancel(keel.WithActor(ctx, "user:ops"), res.Job.ID, "customer withdrew the order")
	if err != nil || row.State != keeltype.JobStateRunning || !row.CancelRequested {
		t.Fatalf("cancel of a running job: %v %+v", err, row)
	}
	row = waitState(t, owner, res.Job.ID, keeltype.JobStateCancelled)
	if row.FinalizedAt == nil {
		t.Fatalf("cancelled job has no finalized_at")
	}
	audit, err := other.AuditList(ctx, &keel.AuditListParams{Action: "job.cancel"})
	if err != nil || len(audit) != 1 || audit[0].Actor != "user:ops" || audit[0].Reason != "customer withdrew the order" {
		t.Fatalf("cancel must be audited with actor and reason: %v %+v", err, audit)
	}
	if _, err := other.JobCancel(ctx, res.Job.ID, "again"); !errors.Is(err, keeltype.ErrInvalidState) {
		t.Fatalf("cancelling a final job must be refused, got %v", err)
	}
}

// TestQueuePauseStopsClaimsOnAnotherClient: one client pauses, another
// (the only worker) stops claiming; resume lets the job run.
func TestQueuePauseStopsClaimsOnAnotherClient(t *testing.T) {
	both(t, testQueuePause[pgx.Tx], testQueuePause[*sql.Tx])
}

func testQueuePause[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	var ran atomic.Int32
	ws := keel.NewWorkers()
	keel.AddWorker(ws, keel.WorkerFunc[noopArgs](func(ctx context.Context, job *keel.Job[noopArgs]) error {
		ran.Add(1)
		return nil
	}))
	worker := startClient(t, d, fastConfig(ws))
	admin := startClient(t, d, &keel.Config{})
	if _, err := admin.QueuePause(ctx, keel.DefaultQueue, "carrier maintenance window"); err != nil {
		t.Fatal(err)
	}
	res, err := admin.Insert(ctx, noopArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The claim statement itself refuses a paused queue, so a direct claim
	// proves the pause without waiting for anything.
	rows, err := d.Executor().JobClaim(ctx, &keeldriver.JobClaimParams{Queue: keel.DefaultQueue, Owner: "probe", Max: 10, LeaseDuration: time.Second})
	if err != nil || len(rows) != 0 {
		t.Fatalf("claimed %d jobs from a paused queue (%v)", len(rows), err)
	}
	if row := jobState(t, worker, res.Job.ID); row.State != keeltype.JobStateAvailable {
		t.Fatalf("job left available while paused: %s", row.State)
	}
	if _, err := admin.QueueResume(ctx, keel.DefaultQueue, "window over"); err != nil {
		t.Fatal(err)
	}
	waitState(t, worker, res.Job.ID, keeltype.JobStateCompleted)
	audit, _ := admin.AuditList(ctx, &keel.AuditListParams{Action: "queue."})
	if len(audit) != 2 {
		t.Fatalf("pause and resume must both be audited, got %d rows", len(audit))
	}
}

type tickArgs struct{}

func (tickArgs) Kind() string { return "test.tick" }

// TestPeriodicFiresOncePerTickAcrossClients: three clients, each configured
// with the same periodic job; every tick is inserted exactly once and none is
// skipped.
func TestPeriodicFiresOncePerTickAcrossClients(t *testing.T) {
	both(t, testPeriodicOncePerTick[pgx.Tx], testPeriodicOncePerTick[*sql.Tx])
}

func testPeriodicOncePerTick[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	period := 100 * time.Millisecond
	var clients []*keel.Client[TTx]
	for range 3 {
		ws := keel.NewWorkers()
		keel.AddWorker(ws, keel.WorkerFunc[tickArgs](func(ctx context.Context, job *keel.Job[tickArgs]) error { return nil }))
		cfg := fastConfig(ws)
		cfg.PeriodicJobs = []*keel.PeriodicJob{{Name: "heartbeat-report", Schedule: keel.Every(period),
			Construct: func(tick time.Time) (keel.JobArgs, *keel.InsertOpts) { return tickArgs{}, nil }}}
		clients = append(clients, startClient(t, d, cfg))
	}
	// Eventually at least 8 ticks exist and, sorted, every tick from the
	// first to the last is there exactly once: none duplicated (the unique
	// key forbids it) and none skipped (a late or new leader catches up).
	var last string
	t.Cleanup(func() {
		if t.Failed() && last != "" {
			t.Logf("last look: %s", last)
		}
	})
	waitFor(t, 30*time.Second, "8 contiguous periodic ticks", func() bool {
		jobs, err := clients[0].JobList(ctx, &keel.JobListParams{Kinds: []string{"test.tick"}, Limit: 1000})
		if err != nil || len(jobs) < 8 {
			return false
		}
		ticks := make([]time.Time, len(jobs))
		for i, j := range jobs {
			ticks[i] = j.RunAt
		}
		slices.SortFunc(ticks, func(a, b time.Time) int { return a.Compare(b) })
		for i := 1; i < len(ticks); i++ {
			if gap := ticks[i].Sub(ticks[i-1]); gap != period {
				last = fmt.Sprintf("ticks %s and %s are %s apart", ticks[i-1].Format("15:04:05.000"), ticks[i].Format("15:04:05.000"), gap)
				return false
			}
		}
		return true
	})
}

// TestLeaderFailover: the leader dies without resigning; another client
// takes over within the leadership lease.
func TestLeaderFailover(t *testing.T) {
	both(t, testLeaderFailover[pgx.Tx], testLeaderFailover[*sql.Tx])
}

func testLeaderFailover[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	ws := keel.NewWorkers()
	keel.AddWorker(ws, keel.WorkerFunc[noopArgs](func(ctx context.Context, job *keel.Job[noopArgs]) error { return nil }))
	cfgA := fastConfig(ws)
	cfgA.ID = "client-a"
	a := startClient(t, d, cfgA)
	waitFor(t, 5*time.Second, "A to lead", func() bool {
		l, err := d.Executor().LeaderGet(ctx, "maintenance")
		return err == nil && l.LeaderID == "client-a"
	})
	cfgB := fastConfig(ws)
	cfgB.ID = "client-b"
	b := startClient(t, d, cfgB)
	// Simulate A dying: stop it without resigning by expiring nothing and
	// just stopping its election loop is not possible from outside, so we
	// stop A hard and then re-plant its lease as if it had crashed mid-term.
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := a.StopAndCancel(stopCtx); err != nil {
		t.Fatal(err)
	}
	crashedAt := time.Now()
	if _, err := d.Executor().LeaderAttemptElect(ctx, &keeldriver.LeaderElectParams{Name: "maintenance", LeaderID: "client-a", TTL: cfgA.LeaderTTL}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*cfgA.LeaderTTL, "B to take over", func() bool {
		l, err := d.Executor().LeaderGet(ctx, "maintenance")
		return err == nil && l.LeaderID == "client-b"
	})
	// One lease, plus B's next election tick and this wait's own polling:
	// on two loaded cores those have added 300 ms to a 600 ms lease.
	if took := time.Since(crashedAt); took > 2*cfgA.LeaderTTL {
		t.Fatalf("failover took %s, want within about one lease (%s)", took, cfgA.LeaderTTL)
	}
	// B now maintains: a delayed job is promoted and run.
	res, err := b.Insert(ctx, noopArgs{}, &keel.InsertOpts{Delay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, b, res.Job.ID, keeltype.JobStateCompleted)
}

type waitingArgs struct{}

func (waitingArgs) Kind() string { return "test.waiting" }

// TestWaitIsNotFailure: a job waiting for a connection is neither failed nor
// charged an attempt; a wake-up resumes it.
func TestWaitIsNotFailure(t *testing.T) {
	both(t, testWaitIsNotFailure[pgx.Tx], testWaitIsNotFailure[*sql.Tx])
}

func testWaitIsNotFailure[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	var connected atomic.Bool
	ws := keel.NewWorkers()
	keel.AddWorker(ws, keel.WorkerFunc[waitingArgs](func(ctx context.Context, job *keel.Job[waitingArgs]) error {
		if !connected.Load() {
			return keel.JobWait("connection", time.Now().Add(time.Hour))
		}
		return nil
	}))
	c := startClient(t, d, fastConfig(ws))
	res, err := c.Insert(ctx, waitingArgs{}, &keel.InsertOpts{FlowKey: "app:42", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	row := waitState(t, c, res.Job.ID, keeltype.JobStateWaiting)
	if row.Attempt != 0 || len(row.Errors) != 0 || row.WaitReason != "connection" {
		t.Fatalf("waiting must cost nothing: attempt=%d errors=%d reason=%q", row.Attempt, len(row.Errors), row.WaitReason)
	}
	connected.Store(true)
	ids, err := c.JobWake(ctx, &keel.JobWakeParams{FlowKey: "app:42", WaitReason: "connection"})
	if err != nil || len(ids) != 1 {
		t.Fatalf("wake: %v %v", err, ids)
	}
	row = waitState(t, c, res.Job.ID, keeltype.JobStateCompleted)
	if row.Attempt != 1 {
		t.Fatalf("attempt %d after wait and success, want 1", row.Attempt)
	}
}

// TestHardStopHandsJobsBack: StopAndCancel returns running jobs to available
// without charging the attempt.
func TestHardStopHandsJobsBack(t *testing.T) {
	both(t, testHardStopHandsBack[pgx.Tx], testHardStopHandsBack[*sql.Tx])
}

func testHardStopHandsBack[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	started := make(chan struct{})
	ws := keel.NewWorkers()
	keel.AddWorker(ws, keel.WorkerFunc[waitCtxArgs](func(ctx context.Context, job *keel.Job[waitCtxArgs]) error {
		close(started)
		<-ctx.Done()
		return context.Cause(ctx)
	}))
	c, err := keel.NewClient(d, fastConfig(ws))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.Insert(ctx, waitCtxArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if err := c.StopAndCancel(ctx); err != nil {
		t.Fatal(err)
	}
	row := jobState(t, c, res.Job.ID)
	if row.State != keeltype.JobStateAvailable || row.Attempt != 0 || row.LeaseOwner != "" || !row.NeedsCheck {
		t.Fatalf("hard stop must hand the job back: %s attempt=%d owner=%q needs_check=%v",
			row.State, row.Attempt, row.LeaseOwner, row.NeedsCheck)
	}
}

// TestRetryAndDeleteAreAudited covers operator retry of a dead letter and
// delete.
func TestRetryAndDeleteAreAudited(t *testing.T) {
	both(t, testRetryAndDelete[pgx.Tx], testRetryAndDelete[*sql.Tx])
}

func testRetryAndDelete[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := keel.WithActor(context.Background(), "user:ops")
	w := &outcomeWorker{}
	row := runOutcome(t, d, w, "permanent", 1)
	c := startClient(t, d, &keel.Config{})
	if _, err := c.JobRetry(ctx, row.ID, "card replaced"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the retried job to run again", func() bool { return w.works.Load() == 2 })
	if _, err := c.JobDelete(ctx, row.ID+1000, "nothing"); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("deleting a missing job: %v", err)
	}
	audit, _ := c.AuditList(ctx, &keel.AuditListParams{Target: fmt.Sprintf("job:%d", row.ID)})
	if len(audit) != 1 || audit[0].Action != "job.retry" {
		t.Fatalf("retry must be audited: %+v", audit)
	}
}

// TestJobFinalizedCounts: the database-wide throughput count sees every
// final state in its window and nothing outside it.
func TestJobFinalizedCounts(t *testing.T) {
	both(t, testJobFinalizedCounts[pgx.Tx], testJobFinalizedCounts[*sql.Tx])
}

func testJobFinalizedCounts[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	workers := keel.NewWorkers()
	keel.AddWorker(workers, &outcomeWorker{})
	c := startClient(t, d, fastConfig(workers))
	before := time.Now().Add(-time.Second)
	var ids []int64
	for _, mode := range []string{"", "", "permanent"} {
		res, err := c.Insert(ctx, outcomeArgs{Mode: mode}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Job.ID)
	}
	waitFor(t, 10*time.Second, "all final", func() bool {
		for _, id := range ids {
			if st := jobState(t, c, id).State; st != keeltype.JobStateCompleted && st != keeltype.JobStateManual {
				return false
			}
		}
		return true
	})
	after := time.Now().Add(time.Second)
	got, err := c.JobFinalizedCounts(ctx, before, after)
	if err != nil {
		t.Fatal(err)
	}
	if got[keeltype.JobStateCompleted] != 2 || got[keeltype.JobStateManual] != 1 {
		t.Fatalf("counts in window %v; want 2 completed, 1 manual", got)
	}
	if got, _ := c.JobFinalizedCounts(ctx, after, after.Add(time.Hour)); len(got) != 0 {
		t.Fatalf("counts after the window: %v", got)
	}
}
