package keelpgx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

func testURL() string {
	if u := os.Getenv("KEEL_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// newTestDriver opens a driver on a fresh schema with the engine migrations
// applied; the schema is dropped when the test ends.
func newTestDriver(t *testing.T) *Driver {
	t.Helper()
	ctx := context.Background()
	schema := "keeltest_" + randomHex(t)
	admin, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("creating schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping schema: %v", err)
		}
	})
	d, err := Open(ctx, testURL(), &Config{Schema: schema})
	if err != nil {
		t.Fatalf("opening driver: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	migrateUp(t, d)
	return d
}

func randomHex(t *testing.T) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func migrateUp(t *testing.T, d *Driver) {
	t.Helper()
	fsys := d.Migrations()
	files, err := fs.Glob(fsys, "*.up.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	slices.Sort(files)
	for _, f := range files {
		sql, err := fs.ReadFile(fsys, f)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Executor().Exec(context.Background(), string(sql)); err != nil {
			t.Fatalf("migration %s: %v", f, err)
		}
	}
}

func insert(t *testing.T, ex keeldriver.Executor, params ...*keeldriver.JobInsertParams) []keeldriver.JobInsertResult {
	t.Helper()
	res, err := ex.JobInsertMany(context.Background(), params)
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	return res
}

func job(kind string) *keeldriver.JobInsertParams {
	return &keeldriver.JobInsertParams{Kind: kind, Queue: "default", Args: json.RawMessage(`{"n":1}`), MaxAttempts: 3}
}

func claim(t *testing.T, ex keeldriver.Executor, queue, owner string, max int) []*keeltype.JobRow {
	t.Helper()
	jobs, err := ex.JobClaim(context.Background(), &keeldriver.JobClaimParams{
		Queue: queue, Owner: owner, Max: max, LeaseDuration: time.Minute,
	})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return jobs
}

func get(t *testing.T, ex keeldriver.Executor, id int64) *keeltype.JobRow {
	t.Helper()
	j, err := ex.JobGet(context.Background(), id)
	if err != nil {
		t.Fatalf("get %d: %v", id, err)
	}
	return j
}

func finish(t *testing.T, ex keeldriver.Executor, params ...*keeldriver.JobFinishParams) []keeldriver.JobFinishResult {
	t.Helper()
	res, err := ex.JobFinishMany(context.Background(), params)
	if err != nil {
		t.Fatalf("finish: %v", err)
	}
	return res
}

func ptr[T any](v T) *T { return &v }

func TestInsertIdempotency(t *testing.T) {
	d := newTestDriver(t)
	ex := d.Executor()
	future := time.Now().Add(time.Hour)
	a := job("email")
	a.IdempotencyKey = "k1"
	b := job("email")
	b.RunAt = &future
	c := job("email")
	c.IdempotencyKey = "k1" // repeats a inside the batch
	e := job("sms")
	e.IdempotencyKey = "k1" // same key, other kind: not a duplicate
	res := insert(t, ex, a, b, c, e)
	if len(res) != 4 {
		t.Fatalf("got %d results", len(res))
	}
	if res[0].Duplicate || res[1].Duplicate || !res[2].Duplicate || res[3].Duplicate {
		t.Fatalf("duplicate flags: %v %v %v %v", res[0].Duplicate, res[1].Duplicate, res[2].Duplicate, res[3].Duplicate)
	}
	if res[2].Job.ID != res[0].Job.ID {
		t.Fatalf("in-batch duplicate returned %d, want %d", res[2].Job.ID, res[0].Job.ID)
	}
	if res[0].Job.State != keeltype.JobStateAvailable || res[1].Job.State != keeltype.JobStateScheduled {
		t.Fatalf("states %s %s", res[0].Job.State, res[1].Job.State)
	}
	if res[3].Job.Kind != "sms" || res[1].Job.IdempotencyKey != "" || res[0].Job.IdempotencyKey != "k1" {
		t.Fatalf("rows not in input order: %+v", res)
	}
	if string(res[0].Job.Metadata) != "{}" || res[0].Job.Priority != defaultPriority {
		t.Fatalf("defaults: metadata %s priority %d", res[0].Job.Metadata, res[0].Job.Priority)
	}
	if res[0].Job.RunAt.Location() != time.UTC {
		t.Fatalf("run_at not UTC: %v", res[0].Job.RunAt.Location())
	}

	// Across calls: the stored row comes back untouched.
	again := job("email")
	again.IdempotencyKey = "k1"
	again.Priority = 4
	res2 := insert(t, ex, job("email"), again)
	if res2[0].Duplicate || !res2[1].Duplicate || res2[1].Job.ID != res[0].Job.ID || res2[1].Job.Priority != defaultPriority {
		t.Fatalf("second insert: %+v %+v", res2[0], res2[1].Job)
	}
	if res2[0].Job.ID <= res[3].Job.ID {
		t.Fatalf("ids not increasing")
	}
}

func TestClaimOrderFenceAttempt(t *testing.T) {
	d := newTestDriver(t)
	ex := d.Executor()
	low := job("a")
	low.Priority = 3
	high := job("a")
	high.Priority = 1
	other := job("a")
	other.Queue = "other"
	res := insert(t, ex, low, high, job("a"), other)

	jobs := claim(t, ex, "default", "w1", 10)
	if len(jobs) != 3 {
		t.Fatalf("claimed %d, want 3", len(jobs))
	}
	wantOrder := []int64{res[1].Job.ID, res[2].Job.ID, res[0].Job.ID}
	for i, j := range jobs {
		if j.ID != wantOrder[i] {
			t.Fatalf("claim order %d: got %d want %d", i, j.ID, wantOrder[i])
		}
		if j.State != keeltype.JobStateRunning || j.Attempt != 1 || j.Fence != 1 || j.LeaseOwner != "w1" ||
			j.LeaseExpiresAt == nil || j.AttemptedAt == nil {
			t.Fatalf("claimed row: %+v", j)
		}
		if d := j.LeaseExpiresAt.Sub(*j.AttemptedAt); d != time.Minute {
			t.Fatalf("lease %v", d)
		}
	}
	if more := claim(t, ex, "default", "w1", 10); len(more) != 0 {
		t.Fatalf("claimed running jobs again: %d", len(more))
	}
	// Snooze gives the attempt back; the next claim bumps the fence again.
	r := finish(t, ex, &keeldriver.JobFinishParams{ID: jobs[0].ID, Fence: 1, State: keeltype.JobStateAvailable, AttemptDelta: -1})
	if !r[0].Applied {
		t.Fatalf("snooze not applied: %+v", r[0])
	}
	again := claim(t, ex, "default", "w2", 1)
	if len(again) != 1 || again[0].Fence != 2 || again[0].Attempt != 1 || again[0].LeaseOwner != "w2" {
		t.Fatalf("reclaim: %+v", again)
	}
}

func TestClaimConcurrentDisjoint(t *testing.T) {
	d := newTestDriver(t)
	ex := d.Executor()
	const total = 300
	params := make([]*keeldriver.JobInsertParams, total)
	for i := range params {
		params[i] = job("c")
	}
	insert(t, ex, params...)

	var mu sync.Mutex
	seen := map[int64]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		owner := "w" + string(rune('a'+w))
		wg.Go(func() {
			for {
				jobs, err := ex.JobClaim(context.Background(), &keeldriver.JobClaimParams{
					Queue: "default", Owner: owner, Max: 7, LeaseDuration: time.Minute,
				})
				if err != nil {
					errs <- err
					return
				}
				if len(jobs) == 0 {
					return
				}
				mu.Lock()
				for _, j := range jobs {
					if prev, dup := seen[j.ID]; dup {
						errs <- errors.New("job claimed by " + prev + " and " + owner)
					}
					seen[j.ID] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != total {
		t.Fatalf("claimed %d distinct jobs, want %d", len(seen), total)
	}
}

func TestPausedQueueClaimsNothing(t *testing.T) {
	d := newTestDriver(t)
	ex := d.Executor()
	ctx := context.Background()
	insert(t, ex, job("p"))
	q, err := ex.QueuePause(ctx, &keeldriver.QueuePauseParams{Name: "default", By: "user:alice"})
	if err != nil || q.PausedAt == nil || q.PausedBy != "user:alice" {
		t.Fatalf("pause: %+v %v", q, err)
	}
	if jobs := claim(t, ex, "default", "w", 10); len(jobs) != 0 {
		t.Fatalf("claimed %d from a paused queue", len(jobs))
	}
	stats, err := ex.QueueStats(ctx)
	if err != nil || len(stats) != 1 || !stats[0].Paused || stats[0].Counts[keeltype.JobStateAvailable] != 1 || stats[0].OldestAvailable == nil {
		t.Fatalf("stats: %+v %v", stats, err)
	}
	if q, err = ex.QueueResume(ctx, "default"); err != nil || q.PausedAt != nil || q.PausedBy != "" {
		t.Fatalf("resume: %+v %v", q, err)
	}
	if jobs := claim(t, ex, "default", "w", 10); len(jobs) != 1 {
		t.Fatalf("claimed %d after resume", len(jobs))
	}
	// A queue known only from keel_queue still shows in stats and lists.
	if _, err := ex.QueuePause(ctx, &keeldriver.QueuePauseParams{Name: "empty"}); err != nil {
		t.Fatal(err)
	}
	stats, _ = ex.QueueStats(ctx)
	if len(stats) != 2 || stats[1].Queue != "empty" || !stats[1].Paused || len(stats[1].Counts) != 0 ||
		stats[0].Counts[keeltype.JobStateRunning] != 1 {
		t.Fatalf("stats after: %+v %+v", stats[0], stats[1])
	}
	list, err := ex.QueueList(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
}

func TestFinishFenced(t *testing.T) {
	d := newTestDriver(t)
	ex := d.Executor()
	insert(t, ex, job("f"), job("f"), job("f"))
	jobs := claim(t, ex, "default", "w", 3)
	runAt := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	res := finish(t, ex,
		&keeldriver.JobFinishParams{ID: jobs[0].ID, Fence: 1, State: keeltype.JobStateCompleted, Result: json.RawMessage(`{"ok":true}`)},
		&keeldriver.JobFinishParams{ID: jobs[1].ID, Fence: 0, State: keeltype.JobStateCompleted},
		&keeldriver.JobFinishParams{ID: 999999, Fence: 1, State: keeltype.JobStateCompleted},
		&keeldriver.JobFinishParams{ID: jobs[2].ID, Fence: 1, State: keeltype.JobStateRetryable, RunAt: &runAt,
			Error: &keeltype.AttemptError{Class: keeltype.ErrorClassRetryable, Message: "boom"}},
	)
	if !res[0].Applied || res[1].Applied || res[2].Applied || !res[3].Applied {
		t.Fatalf("applied: %+v", res)
	}
	if res[1].CurrentState != keeltype.JobStateRunning || res[1].CurrentFence != 1 || res[1].ID != jobs[1].ID {
		t.Fatalf("stale explanation: %+v", res[1])
	}
	if res[2].CurrentState != "" || res[2].CurrentFence != 0 {
		t.Fatalf("missing explanation: %+v", res[2])
	}
	done := get(t, ex, jobs[0].ID)
	if done.State != keeltype.JobStateCompleted || done.FinalizedAt == nil || done.LeaseOwner != "" ||
		done.LeaseExpiresAt != nil || string(done.Result) != `{"ok": true}` {
		t.Fatalf("completed row: %+v result %s", done, done.Result)
	}
	retry := get(t, ex, jobs[2].ID)
	if retry.State != keeltype.JobStateRetryable || !retry.RunAt.Equal(runAt) || retry.FinalizedAt != nil || len(retry.Errors) != 1 {
		t.Fatalf("retryable row: %+v", retry)
	}
	if e := retry.Errors[0]; e.Attempt != 1 || e.Fence != 1 || e.Class != keeltype.ErrorClassRetryable || e.Message != "boom" || e.At.IsZero() {
		t.Fatalf("error entry: %+v", e)
	}
	// The same commit again is now stale: the job is no longer running.
	res = finish(t, ex, &keeldriver.JobFinishParams{ID: jobs[0].ID, Fence: 1, State: keeltype.JobStateFailed})
	if res[0].Applied || res[0].CurrentState != keeltype.JobStateCompleted || res[0].CurrentFence != 1 {
		t.Fatalf("second finish: %+v", res[0])
	}
	if _, err := ex.JobFinishMany(context.Background(), []*keeldriver.JobFinishParams{{ID: 1, State: "running"}}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("finish to running: %v", err)
	}
}

func TestHeartbeat(t *testing.T) {
	d := newTestDriver(t)
	ex := d.Executor()
	insert(t, ex, job("h"), job("h"))
	jobs := claim(t, ex, "default", "w", 2)
	later := time.Now().Add(time.Hour)
	ids, err := ex.JobHeartbeat(context.Background(), &keeldriver.JobHeartbeatParams{
		Owner: "w", IDs: []int64{jobs[0].ID, jobs[1].ID}, Fences: []int64{1, 7}, LeaseDuration: time.Minute, Now: &later,
	})
	if err != nil || len(ids) != 1 || ids[0] != jobs[0].ID {
		t.Fatalf("heartbeat: %v %v", ids, err)
	}
	if got := get(t, ex, jobs[0].ID); !got.LeaseExpiresAt.Equal(later.Add(time.Minute).Truncate(time.Microsecond)) {
		t.Fatalf("lease not extended: %v", got.LeaseExpiresAt)
	}
	ids, err = ex.JobHeartbeat(context.Background(), &keeldriver.JobHeartbeatParams{
		Owner: "intruder", IDs: []int64{jobs[0].ID}, Fences: []int64{1}, LeaseDuration: time.Minute,
	})
	if err != nil || len(ids) != 0 {
		t.Fatalf("foreign heartbeat: %v %v", ids, err)
	}
}

func TestPromote(t *testing.T) {
	d := newTestDriver(t)
	ex := d.Executor()
	ctx := context.Background()
	future := time.Now().Add(time.Hour)
	sched := job("s")
	sched.RunAt = &future
	sched.Queue = "q1"
	insert(t, ex, sched, job("u"), job("w"))
	running := claim(t, ex, "default", "w", 2)
	deadline := time.Now().Add(30 * time.Minute)
	finish(t, ex,
		&keeldriver.JobFinishParams{ID: running[0].ID, Fence: 1, State: keeltype.JobStateUnknown, RunAt: &future, NeedsCheck: true},
		&keeldriver.JobFinishParams{ID: running[1].ID, Fence: 1, State: keeltype.JobStateWaiting, WaitReason: "approval",
			WaitDeadline: &deadline, AttemptDelta: -1},
	)
	if queues, err := ex.JobPromote(ctx, &keeldriver.JobPromoteParams{Max: 10}); err != nil || len(queues) != 0 {
		t.Fatalf("promoted early: %v %v", queues, err)
	}
	w := get(t, ex, running[1].ID)
	if w.State != keeltype.JobStateWaiting || w.Attempt != 0 || w.WaitReason != "approval" || w.WaitDeadline == nil {
		t.Fatalf("waiting row: %+v", w)
	}
	later := time.Now().Add(2 * time.Hour)
	queues, err := ex.JobPromote(ctx, &keeldriver.JobPromoteParams{Max: 10, Now: &later})
	if err != nil || !slices.Equal(queues, []string{"default", "q1"}) {
		t.Fatalf("promote: %v %v", queues, err)
	}
	for _, id := range []int64{running[0].ID, running[1].ID} {
		if j := get(t, ex, id); j.State != keeltype.JobStateAvailable {
			t.Fatalf("job %d state %s", id, j.State)
		}
	}
	if j := get(t, ex, running[0].ID); !j.NeedsCheck {
		t.Fatal("unknown job lost needs_check")
	}
	if j := get(t, ex, running[1].ID); j.WaitReason != "approval" {
		t.Fatalf("expired wait lost its reason: %+v", j)
	}
}

func TestRescue(t *testing.T) {
	d := newTestDriver(t)
	ex := d.Executor()
	ctx := context.Background()
	last := job("r")
	last.MaxAttempts = 1
	insert(t, ex, job("r"), last)
	jobs := claim(t, ex, "default", "dead-worker", 2)
	if rescued, err := ex.JobRescue(ctx, &keeldriver.JobRescueParams{Max: 10}); err != nil || len(rescued) != 0 {
		t.Fatalf("rescued live leases: %v %v", rescued, err)
	}
	later := time.Now().Add(2 * time.Minute)
	rescued, err := ex.JobRescue(ctx, &keeldriver.JobRescueParams{Max: 10, Now: &later})
	if err != nil || len(rescued) != 2 {
		t.Fatalf("rescue: %v %v", rescued, err)
	}
	byID := map[int64]*keeltype.JobRow{rescued[0].ID: rescued[0], rescued[1].ID: rescued[1]}
	a, b := byID[jobs[0].ID], byID[jobs[1].ID]
	if a.State != keeltype.JobStateAvailable || !a.NeedsCheck || a.LeaseOwner != "" || a.LeaseExpiresAt != nil {
		t.Fatalf("rescued row: %+v", a)
	}
	if b.State != keeltype.JobStateManual {
		t.Fatalf("exhausted job state %s, want manual", b.State)
	}
	if len(a.Errors) != 1 {
		t.Fatalf("errors: %+v", a.Errors)
	}
	e := a.Errors[0]
	if e.Class != keeltype.ErrorClassLeaseExpired || e.Attempt != 1 || e.Fence != 1 ||
		e.Message != "lease expired (owner dead-worker)" || !e.At.Equal(later.Truncate(time.Microsecond)) {
		t.Fatalf("error entry: %+v", e)
	}
}

func TestCancelRetryDelete(t *testing.T) {
	d := newTestDriver(t)
	ex := d.Executor()
	ctx := context.Background()
	res := insert(t, ex, job("x"), job("x"))
	idle, busy := res[0].Job.ID, res[1].Job.ID
	c, err := ex.JobCancel(ctx, &keeldriver.JobCancelParams{ID: idle})
	if err != nil || c.State != keeltype.JobStateCancelled || c.FinalizedAt == nil {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	var ise *keeltype.InvalidStateError
	if _, err := ex.JobCancel(ctx, &keeldriver.JobCancelParams{ID: idle}); !errors.As(err, &ise) || ise.Action != "cancel" || ise.State != keeltype.JobStateCancelled {
		t.Fatalf("cancel final: %v", err)
	}
	if _, err := ex.JobCancel(ctx, &keeldriver.JobCancelParams{ID: 424242}); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("cancel missing: %v", err)
	}
	if got := claim(t, ex, "default", "w", 1); len(got) != 1 || got[0].ID != busy {
		t.Fatalf("claim: %+v", got)
	}
	c, err = ex.JobCancel(ctx, &keeldriver.JobCancelParams{ID: busy})
	if err != nil || c.State != keeltype.JobStateRunning || !c.CancelRequested || c.FinalizedAt != nil {
		t.Fatalf("cancel running: %+v %v", c, err)
	}
	if _, err := ex.JobDelete(ctx, busy); !errors.As(err, &ise) || ise.Action != "delete" {
		t.Fatalf("delete running: %v", err)
	}
	if _, err := ex.JobRetry(ctx, &keeldriver.JobRetryParams{ID: busy}); !errors.As(err, &ise) || ise.Action != "retry" || ise.State != keeltype.JobStateRunning {
		t.Fatalf("retry running: %v", err)
	}
	// Exhaust the budget, then retry gives exactly one more attempt.
	finish(t, ex, &keeldriver.JobFinishParams{ID: busy, Fence: 1, State: keeltype.JobStateManual,
		Error: &keeltype.AttemptError{Class: keeltype.ErrorClassPermanent, Message: "no"}})
	if _, err := d.pool.Exec(ctx, "UPDATE keel_job SET attempt = 3 WHERE id = $1", busy); err != nil {
		t.Fatal(err)
	}
	r, err := ex.JobRetry(ctx, &keeldriver.JobRetryParams{ID: busy})
	if err != nil || r.State != keeltype.JobStateAvailable || r.MaxAttempts != 4 || r.CancelRequested || len(r.Errors) != 1 {
		t.Fatalf("retry: %+v %v", r, err)
	}
	if _, err := ex.JobRetry(ctx, &keeldriver.JobRetryParams{ID: busy}); !errors.As(err, &ise) {
		t.Fatalf("retry available: %v", err)
	}
	if r, err = ex.JobRetry(ctx, &keeldriver.JobRetryParams{ID: idle}); err != nil || r.FinalizedAt != nil || r.State != keeltype.JobStateAvailable {
		t.Fatalf("retry cancelled: %+v %v", r, err)
	}
	del, err := ex.JobDelete(ctx, idle)
	if err != nil || del.ID != idle {
		t.Fatalf("delete: %+v %v", del, err)
	}
	if _, err := ex.JobGet(ctx, idle); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if _, err := ex.JobDelete(ctx, idle); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("delete missing: %v", err)
	}
}

func TestWake(t *testing.T) {
	d := newTestDriver(t)
	ex := d.Executor()
	ctx := context.Background()
	var params []*keeldriver.JobInsertParams
	for range 3 {
		p := job("w")
		p.FlowKey = "order:1"
		params = append(params, p)
	}
	insert(t, ex, params...)
	jobs := claim(t, ex, "default", "w", 3)
	reasons := []string{"payment", "payment", "shipping"}
	for i, j := range jobs {
		finish(t, ex, &keeldriver.JobFinishParams{ID: j.ID, Fence: 1, State: keeltype.JobStateWaiting, WaitReason: reasons[i], AttemptDelta: -1})
	}
	if _, err := ex.JobWake(ctx, &keeldriver.JobWakeParams{}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("wake without filter: %v", err)
	}
	woken, err := ex.JobWake(ctx, &keeldriver.JobWakeParams{FlowKey: "order:1", WaitReason: "payment"})
	slices.Sort(woken)
	if err != nil || !slices.Equal(woken, []int64{jobs[0].ID, jobs[1].ID}) {
		t.Fatalf("wake by flow key: %v %v", woken, err)
	}
	if j := get(t, ex, jobs[0].ID); j.State != keeltype.JobStateAvailable || j.WaitReason != "" {
		t.Fatalf("woken row: %+v", j)
	}
	woken, err = ex.JobWake(ctx, &keeldriver.JobWakeParams{IDs: []int64{jobs[0].ID, jobs[2].ID}})
	if err != nil || !slices.Equal(woken, []int64{jobs[2].ID}) {
		t.Fatalf("wake by ids: %v %v", woken, err)
	}
}

func TestListAndPrune(t *testing.T) {
	d := newTestDriver(t)
	ex := d.Executor()
	ctx := context.Background()
	other := job("y")
	other.Queue = "other"
	res := insert(t, ex, job("x"), job("x"), job("x"), other)
	jobs := claim(t, ex, "default", "w", 2)
	finish(t, ex,
		&keeldriver.JobFinishParams{ID: jobs[0].ID, Fence: 1, State: keeltype.JobStateCompleted},
		&keeldriver.JobFinishParams{ID: jobs[1].ID, Fence: 1, State: keeltype.JobStateSkipped})

	list, err := ex.JobList(ctx, &keeldriver.JobListParams{Kinds: []string{"x"}, Limit: 2})
	if err != nil || len(list) != 2 || list[0].ID != res[0].Job.ID || list[1].ID != res[1].Job.ID {
		t.Fatalf("list page 1: %v", err)
	}
	list, _ = ex.JobList(ctx, &keeldriver.JobListParams{Kinds: []string{"x"}, AfterID: list[1].ID})
	if len(list) != 1 || list[0].ID != res[2].Job.ID {
		t.Fatalf("list page 2: %+v", list)
	}
	list, _ = ex.JobList(ctx, &keeldriver.JobListParams{Desc: true, States: []keeltype.JobState{keeltype.JobStateAvailable}})
	if len(list) != 2 || list[0].ID != res[3].Job.ID || list[1].ID != res[2].Job.ID {
		t.Fatalf("list desc: %+v", list)
	}
	list, _ = ex.JobList(ctx, &keeldriver.JobListParams{Desc: true, BeforeID: res[3].Job.ID, Queues: []string{"other"}})
	if len(list) != 0 {
		t.Fatalf("list before: %+v", list)
	}

	n, err := ex.JobPrune(ctx, &keeldriver.JobPruneParams{Before: time.Now().Add(-time.Hour), Max: 10})
	if err != nil || n != 0 {
		t.Fatalf("prune recent: %d %v", n, err)
	}
	n, err = ex.JobPrune(ctx, &keeldriver.JobPruneParams{Before: time.Now().Add(time.Hour), Max: 1})
	if err != nil || n != 1 {
		t.Fatalf("prune max 1: %d %v", n, err)
	}
	n, _ = ex.JobPrune(ctx, &keeldriver.JobPruneParams{Before: time.Now().Add(time.Hour), Max: 10})
	if n != 1 {
		t.Fatalf("prune rest: %d", n)
	}
	if all, _ := ex.JobList(ctx, &keeldriver.JobListParams{}); len(all) != 2 {
		t.Fatalf("left %d jobs, want 2", len(all))
	}
}

func TestLeaderElection(t *testing.T) {
	d := newTestDriver(t)
	ex := d.Executor()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	elect := func(id string, at time.Time) bool {
		t.Helper()
		ok, err := ex.LeaderAttemptElect(ctx, &keeldriver.LeaderElectParams{Name: "main", LeaderID: id, TTL: 10 * time.Second, Now: &at})
		if err != nil {
			t.Fatalf("elect %s: %v", id, err)
		}
		return ok
	}
	if !elect("a", now) {
		t.Fatal("a not elected on an empty table")
	}
	if elect("b", now.Add(time.Second)) {
		t.Fatal("b elected while a holds the lease")
	}
	if !elect("a", now.Add(5*time.Second)) {
		t.Fatal("a not re-elected")
	}
	l, err := ex.LeaderGet(ctx, "main")
	if err != nil || l.LeaderID != "a" || !l.ElectedAt.Equal(now) || !l.ExpiresAt.Equal(now.Add(15*time.Second)) {
		t.Fatalf("leader row: %+v %v", l, err)
	}
	if elect("b", now.Add(14*time.Second)) {
		t.Fatal("b took an unexpired lease")
	}
	if !elect("b", now.Add(16*time.Second)) {
		t.Fatal("b did not take the expired lease")
	}
	if err := ex.LeaderResign(ctx, &keeldriver.LeaderElectParams{Name: "main", LeaderID: "a"}); err != nil {
		t.Fatal(err)
	}
	if l, _ := ex.LeaderGet(ctx, "main"); l == nil || l.LeaderID != "b" {
		t.Fatalf("non-holder resign removed the lease: %+v", l)
	}
	if err := ex.LeaderResign(ctx, &keeldriver.LeaderElectParams{Name: "main", LeaderID: "b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.LeaderGet(ctx, "main"); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("after resign: %v", err)
	}
}

func TestLeaderElectionConcurrent(t *testing.T) {
	d := newTestDriver(t)
	ex := d.Executor()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var winners []string
	for i := range 10 {
		id := string(rune('a' + i))
		wg.Go(func() {
			ok, err := ex.LeaderAttemptElect(context.Background(), &keeldriver.LeaderElectParams{Name: "main", LeaderID: id, TTL: time.Minute})
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				winners = append(winners, id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("winners %v, want exactly one", winners)
	}
}

func TestListenerAndSchemaIsolation(t *testing.T) {
	d1 := newTestDriver(t)
	d2 := newTestDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l := d1.Listener()
	if err := l.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	if err := l.Listen(ctx, "job_insert"); err != nil {
		t.Fatal(err)
	}
	// d2 is another install in the same database: its notification must not
	// reach d1's listener; d1's own must.
	if err := d2.Notify(ctx, "job_insert", "from-d2"); err != nil {
		t.Fatal(err)
	}
	if err := d1.Notify(ctx, "job_insert", "from-d1"); err != nil {
		t.Fatal(err)
	}
	n, err := l.WaitForNotification(ctx)
	if err != nil || n.Topic != "job_insert" || n.Payload != "from-d1" {
		t.Fatalf("notification: %+v %v", n, err)
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if n, err := l.WaitForNotification(short); err == nil {
		t.Fatalf("unexpected notification %+v", n)
	}

	insert(t, d2.Executor(), job("iso"))
	if list, _ := d1.Executor().JobList(ctx, &keeldriver.JobListParams{}); len(list) != 0 {
		t.Fatalf("d1 sees d2's jobs: %d", len(list))
	}
	if list, _ := d2.Executor().JobList(ctx, &keeldriver.JobListParams{}); len(list) != 1 {
		t.Fatalf("d2 jobs: %d", len(list))
	}
}

func TestLongTopicChannel(t *testing.T) {
	ch := channelName("keeltest_0123456789ab", string(make([]byte, 100)))
	if len(ch) > maxChannelLen {
		t.Fatalf("channel %q longer than %d", ch, maxChannelLen)
	}
}

func TestTransactions(t *testing.T) {
	d := newTestDriver(t)
	ctx := context.Background()
	tx, err := d.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	etx := d.UnwrapExecutor(tx)
	if d.UnwrapTx(etx) != tx {
		t.Fatal("UnwrapTx did not return the caller's tx")
	}
	kept := insert(t, etx, job("t"))[0].Job.ID
	// Begin inside the caller's tx is a savepoint: rolling it back keeps the
	// outer work.
	sp, err := etx.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dropped := insert(t, sp, job("t"))[0].Job.ID
	if err := sp.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := etx.Commit(ctx); err != nil { // no-op: the caller owns tx
		t.Fatal(err)
	}
	if _, err := etx.JobGet(ctx, dropped); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("savepoint rollback kept job: %v", err)
	}
	if _, err := d.Executor().JobGet(ctx, kept); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("uncommitted job visible outside the tx: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	get(t, d.Executor(), kept)

	own, err := d.Executor().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := insert(t, own, job("t"))[0].Job.ID
	if err := own.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := own.Rollback(ctx); err != nil {
		t.Fatalf("rollback after commit: %v", err)
	}
	get(t, d.Executor(), id)
}

func TestAuditAndMigrations(t *testing.T) {
	d := newTestDriver(t)
	ex := d.Executor()
	ctx := context.Background()
	for _, a := range []string{"queue.pause", "job.cancel", "queue.resume", "queue_x.other"} {
		if _, err := ex.AuditInsert(ctx, &keeltype.AuditRow{Actor: "user:alice", Action: a, Target: "queue:default"}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := ex.AuditList(ctx, &keeldriver.AuditListParams{Action: "queue."})
	if err != nil || len(list) != 2 || list[0].Action != "queue.resume" || string(list[0].Context) != "{}" {
		t.Fatalf("audit prefix: %+v %v", list, err)
	}
	list, _ = ex.AuditList(ctx, &keeldriver.AuditListParams{BeforeID: list[0].ID, Limit: 1})
	if len(list) != 1 || list[0].Action != "job.cancel" {
		t.Fatalf("audit paging: %+v", list)
	}

	ok, err := ex.TableExists(ctx, "keel_job")
	if err != nil || !ok {
		t.Fatalf("keel_job exists: %v %v", ok, err)
	}
	if ok, _ := ex.TableExists(ctx, "nope"); ok {
		t.Fatal("nope exists")
	}
	if err := ex.MigrationRecord(ctx, &keeldriver.MigrationRow{Line: "engine", Version: 1, Name: "engine"}); err != nil {
		t.Fatal(err)
	}
	applied, err := ex.MigrationApplied(ctx)
	if err != nil || len(applied) != 1 || applied[0].AppliedAt.IsZero() {
		t.Fatalf("applied: %+v %v", applied, err)
	}
	if err := ex.MigrationForget(ctx, "engine", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := d.pool.Exec(ctx, "DROP TABLE keel_migration"); err != nil {
		t.Fatal(err)
	}
	applied, err = ex.MigrationApplied(ctx)
	if err != nil || applied == nil || len(applied) != 0 {
		t.Fatalf("applied without table: %v %v", applied, err)
	}
}

func TestConfig(t *testing.T) {
	if _, err := Open(context.Background(), testURL(), &Config{Schema: "bad-name; drop"}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("bad schema: %v", err)
	}
	d := newTestDriver(t)
	if _, err := New(d.Pool(), &Config{Schema: "other_schema"}); err == nil {
		t.Fatal("New accepted a pool with another search_path")
	}
	if d.Dialect() != "postgres" || !d.SupportsListener() {
		t.Fatal("capabilities")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Executor().JobGet(context.Background(), 1); !errors.Is(err, keeldriver.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}
