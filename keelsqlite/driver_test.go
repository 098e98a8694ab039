package keelsqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// openTest opens a fresh database in t.TempDir() with the engine migrations
// applied by executing the .up.sql files in order.
func openTest(t testing.TB) *Driver {
	t.Helper()
	d := openFile(t, filepath.Join(t.TempDir(), "keel.db"))
	migrate(t, d)
	return d
}

func openFile(t testing.TB, path string) *Driver {
	t.Helper()
	d, err := Open(path, &Config{ReadConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func migrate(t testing.TB, d *Driver) {
	t.Helper()
	files, err := fs.Glob(d.Migrations(), "*.up.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	sort.Strings(files)
	for _, f := range files {
		src, err := fs.ReadFile(d.Migrations(), f)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Executor().Exec(context.Background(), string(src)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
}

// t0 is in the past: inserts use the real clock, so RunAt before t0 is due.
var t0 = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)

func at(d time.Duration) *time.Time {
	v := t0.Add(d)
	return &v
}

func insert(t *testing.T, d *Driver, params ...*keeldriver.JobInsertParams) []*keeltype.JobRow {
	t.Helper()
	res, err := d.Executor().JobInsertMany(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*keeltype.JobRow, len(res))
	for i, r := range res {
		out[i] = r.Job
	}
	return out
}

// job is an available job of kind "k" in queue q (run_at in the past).
func job(q string) *keeldriver.JobInsertParams {
	return &keeldriver.JobInsertParams{Kind: "k", Queue: q, RunAt: at(-time.Hour)}
}

func claim(t *testing.T, d *Driver, queue, owner string, n int, now *time.Time) []*keeltype.JobRow {
	t.Helper()
	jobs, err := d.Executor().JobClaim(context.Background(), &keeldriver.JobClaimParams{
		Queue: queue, Owner: owner, Max: n, LeaseDuration: time.Minute, Now: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func get(t *testing.T, d *Driver, id int64) *keeltype.JobRow {
	t.Helper()
	j, err := d.Executor().JobGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func finish(t *testing.T, d *Driver, p ...*keeldriver.JobFinishParams) []keeldriver.JobFinishResult {
	t.Helper()
	res, err := d.Executor().JobFinishMany(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestMigrationsAndCatalogue(t *testing.T) {
	ctx := context.Background()
	d := openFile(t, filepath.Join(t.TempDir(), "keel.db"))
	ex := d.Executor()
	if got, err := ex.MigrationApplied(ctx); err != nil || len(got) != 0 {
		t.Fatalf("before migrating: %v, %v", got, err)
	}
	migrate(t, d)
	for _, name := range []string{"keel_job", "keel_queue", "keel_leader", "keel_audit", "keel_migration"} {
		if ok, err := ex.TableExists(ctx, name); err != nil || !ok {
			t.Fatalf("table %s: %v %v", name, ok, err)
		}
	}
	if ok, _ := ex.TableExists(ctx, "nope"); ok {
		t.Fatal("nope exists")
	}
	if err := ex.MigrationRecord(ctx, &keeldriver.MigrationRow{Line: "engine", Version: 1, Name: "engine", AppliedAt: t0}); err != nil {
		t.Fatal(err)
	}
	got, err := ex.MigrationApplied(ctx)
	if err != nil || len(got) != 1 || got[0].Name != "engine" || !got[0].AppliedAt.Equal(t0) {
		t.Fatalf("applied: %+v %v", got, err)
	}
	if err := ex.MigrationForget(ctx, "engine", 1); err != nil {
		t.Fatal(err)
	}
	if got, _ := ex.MigrationApplied(ctx); len(got) != 0 {
		t.Fatalf("after forget: %+v", got)
	}
	if d.Dialect() != "sqlite" || d.SupportsListener() {
		t.Fatal("dialect/listener capability")
	}
	if _, err := fs.Stat(d.Migrations(), "001_engine.down.sql"); err != nil {
		t.Fatal(err)
	}
}

func TestInsertDefaultsAndIdempotency(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	res, err := d.Executor().JobInsertMany(ctx, []*keeldriver.JobInsertParams{
		{Kind: "email", IdempotencyKey: "k1", Args: json.RawMessage(`{"to": "a"}`)},
		{Kind: "email", Queue: "q", RunAt: at(24 * 365 * time.Hour * 100), Priority: 4, MaxAttempts: 3, FlowKey: "f", BatchID: 7, Subject: "s"},
		{Kind: "email", IdempotencyKey: "k1", Args: json.RawMessage(`{"to": "b"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, b, dup := res[0], res[1], res[2]
	if a.Duplicate || b.Duplicate || !dup.Duplicate {
		t.Fatalf("duplicate flags: %v %v %v", a.Duplicate, b.Duplicate, dup.Duplicate)
	}
	if dup.Job.ID != a.Job.ID || string(dup.Job.Args) != `{"to":"a"}` {
		t.Fatalf("duplicate should be the original untouched: %+v", dup.Job)
	}
	j := a.Job
	if j.Queue != "default" || j.Priority != 2 || j.MaxAttempts != 25 || string(j.Metadata) != "{}" ||
		j.State != keeltype.JobStateAvailable || j.IdempotencyKey != "k1" || len(j.Errors) != 0 ||
		j.CreatedAt.Location() != time.UTC || j.LeaseExpiresAt != nil || j.Result != nil {
		t.Fatalf("defaults: %+v", j)
	}
	j = b.Job
	if j.State != keeltype.JobStateScheduled || j.Queue != "q" || j.Priority != 4 || j.MaxAttempts != 3 ||
		j.FlowKey != "f" || j.BatchID != 7 || j.Subject != "s" {
		t.Fatalf("explicit fields: %+v", j)
	}
	// A later call sees the duplicate too, and a different kind does not clash.
	res, err = d.Executor().JobInsertMany(ctx, []*keeldriver.JobInsertParams{
		{Kind: "email", IdempotencyKey: "k1"}, {Kind: "sms", IdempotencyKey: "k1"},
	})
	if err != nil || !res[0].Duplicate || res[0].Job.ID != a.Job.ID || res[1].Duplicate {
		t.Fatalf("second batch: %+v %v", res, err)
	}
	// A bad row fails the whole batch.
	_, err = d.Executor().JobInsertMany(ctx, []*keeldriver.JobInsertParams{{Kind: "ok"}, {Kind: "bad", Args: json.RawMessage("{")}})
	if err == nil || !strings.Contains(err.Error(), "keelsqlite: inserting jobs") {
		t.Fatalf("malformed args: %v", err)
	}
	list, _ := d.Executor().JobList(ctx, &keeldriver.JobListParams{Kinds: []string{"ok"}})
	if len(list) != 0 {
		t.Fatal("failed batch left rows")
	}
}

func TestClaimOrderFenceAndAttempt(t *testing.T) {
	d := openTest(t)
	low := &keeldriver.JobInsertParams{Kind: "k", Queue: "q", Priority: 3, RunAt: at(-time.Hour)}
	high := &keeldriver.JobInsertParams{Kind: "k", Queue: "q", Priority: 1, RunAt: at(-time.Hour)}
	jobs := insert(t, d, low, high, job("q"), job("other"))
	got := claim(t, d, "q", "w1", 2, at(0))
	if len(got) != 2 || got[0].ID != jobs[1].ID || got[1].ID != jobs[2].ID {
		t.Fatalf("claim order: %+v", got)
	}
	for _, j := range got {
		if j.State != keeltype.JobStateRunning || j.Attempt != 1 || j.Fence != 1 || j.LeaseOwner != "w1" ||
			!j.LeaseExpiresAt.Equal(t0.Add(time.Minute)) || !j.AttemptedAt.Equal(t0) {
			t.Fatalf("claimed row: %+v", j)
		}
	}
	got = claim(t, d, "q", "w2", 10, at(0))
	if len(got) != 1 || got[0].ID != jobs[0].ID {
		t.Fatalf("second claim: %+v", got)
	}
	if got := claim(t, d, "q", "w2", 10, at(0)); len(got) != 0 {
		t.Fatalf("empty queue claimed %d", len(got))
	}
}

func TestClaimConcurrentNeverDuplicates(t *testing.T) {
	d := openTest(t)
	const total = 300
	params := make([]*keeldriver.JobInsertParams, total)
	for i := range params {
		params[i] = job("q")
	}
	insert(t, d, params...)
	var mu sync.Mutex
	seen := map[int64]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("w%d", w)
			for {
				jobs, err := d.Executor().JobClaim(context.Background(), &keeldriver.JobClaimParams{
					Queue: "q", Owner: owner, Max: 7, LeaseDuration: time.Minute,
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
						errs <- fmt.Errorf("job %d claimed by %s and %s", j.ID, prev, owner)
					}
					seen[j.ID] = owner
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != total {
		t.Fatalf("claimed %d of %d", len(seen), total)
	}
}

func TestClaimPausedQueue(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	insert(t, d, job("q"), job("other"))
	row, err := d.Executor().QueuePause(ctx, &keeldriver.QueuePauseParams{Name: "q", By: "user:alice", Now: at(0)})
	if err != nil || row.PausedAt == nil || !row.PausedAt.Equal(t0) || row.PausedBy != "user:alice" {
		t.Fatalf("pause: %+v %v", row, err)
	}
	if got := claim(t, d, "q", "w", 10, nil); len(got) != 0 {
		t.Fatal("claimed from a paused queue")
	}
	if got := claim(t, d, "other", "w", 10, nil); len(got) != 1 {
		t.Fatal("pause leaked to another queue")
	}
	if row, err := d.Executor().QueueResume(ctx, "q"); err != nil || row.PausedAt != nil || row.PausedBy != "" {
		t.Fatalf("resume: %+v %v", row, err)
	}
	if got := claim(t, d, "q", "w", 10, nil); len(got) != 1 {
		t.Fatal("resumed queue claims nothing")
	}
}

func TestFinishFencing(t *testing.T) {
	d := openTest(t)
	insert(t, d, job("q"), job("q"), job("q"))
	claimed := claim(t, d, "q", "w", 3, at(0))
	a, b, c := claimed[0], claimed[1], claimed[2]
	res := finish(t, d,
		&keeldriver.JobFinishParams{ID: a.ID, Fence: a.Fence, State: keeltype.JobStateCompleted,
			Result: json.RawMessage(`{"ok": true}`), Now: at(time.Second)},
		&keeldriver.JobFinishParams{ID: b.ID, Fence: b.Fence + 5, State: keeltype.JobStateCompleted},
		&keeldriver.JobFinishParams{ID: 99999, Fence: 1, State: keeltype.JobStateCompleted},
		&keeldriver.JobFinishParams{ID: c.ID, Fence: c.Fence, State: keeltype.JobStateRetryable, RunAt: at(time.Hour),
			Error: &keeltype.AttemptError{Class: keeltype.ErrorClassRetryable, Message: "boom"}, Now: at(time.Second)},
	)
	want := []keeldriver.JobFinishResult{
		{ID: a.ID, Applied: true},
		{ID: b.ID, CurrentState: keeltype.JobStateRunning, CurrentFence: 1},
		{ID: 99999},
		{ID: c.ID, Applied: true},
	}
	for i := range want {
		if res[i] != want[i] {
			t.Fatalf("result %d: got %+v want %+v", i, res[i], want[i])
		}
	}
	ja := get(t, d, a.ID)
	if ja.State != keeltype.JobStateCompleted || ja.FinalizedAt == nil || !ja.FinalizedAt.Equal(t0.Add(time.Second)) ||
		ja.LeaseOwner != "" || ja.LeaseExpiresAt != nil || string(ja.Result) != `{"ok":true}` {
		t.Fatalf("completed row: %+v", ja)
	}
	jc := get(t, d, c.ID)
	if jc.State != keeltype.JobStateRetryable || jc.FinalizedAt != nil || !jc.RunAt.Equal(t0.Add(time.Hour)) || len(jc.Errors) != 1 {
		t.Fatalf("retryable row: %+v", jc)
	}
	e := jc.Errors[0]
	if e.Attempt != 1 || e.Fence != 1 || e.Class != keeltype.ErrorClassRetryable || e.Message != "boom" || !e.At.Equal(t0.Add(time.Second)) {
		t.Fatalf("error entry: %+v", e)
	}
	// Once finished, the same fence is stale.
	res = finish(t, d, &keeldriver.JobFinishParams{ID: a.ID, Fence: a.Fence, State: keeltype.JobStateFailed})
	if res[0].Applied || res[0].CurrentState != keeltype.JobStateCompleted || res[0].CurrentFence != 1 {
		t.Fatalf("refinish: %+v", res[0])
	}
}

func TestFinishSnoozeAndWait(t *testing.T) {
	d := openTest(t)
	insert(t, d, job("q"), job("q"))
	c := claim(t, d, "q", "w", 2, at(0))
	finish(t, d,
		&keeldriver.JobFinishParams{ID: c[0].ID, Fence: c[0].Fence, State: keeltype.JobStateAvailable, RunAt: at(time.Minute), AttemptDelta: -1},
		&keeldriver.JobFinishParams{ID: c[1].ID, Fence: c[1].Fence, State: keeltype.JobStateWaiting, AttemptDelta: -1,
			WaitReason: "approval", WaitDeadline: at(time.Hour), NeedsCheck: true},
	)
	s := get(t, d, c[0].ID)
	if s.State != keeltype.JobStateAvailable || s.Attempt != 0 || !s.RunAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("snoozed: %+v", s)
	}
	w := get(t, d, c[1].ID)
	if w.State != keeltype.JobStateWaiting || w.Attempt != 0 || w.WaitReason != "approval" ||
		!w.WaitDeadline.Equal(t0.Add(time.Hour)) || !w.NeedsCheck {
		t.Fatalf("waiting: %+v", w)
	}
}

func TestHeartbeat(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	insert(t, d, job("q"), job("q"), job("q"))
	c := claim(t, d, "q", "w", 3, at(0))
	// Second job changes owner: re-claim after making it available again.
	finish(t, d, &keeldriver.JobFinishParams{ID: c[1].ID, Fence: c[1].Fence, State: keeltype.JobStateAvailable})
	other := claim(t, d, "q", "x", 1, at(0))
	if len(other) != 1 || other[0].ID != c[1].ID {
		t.Fatalf("reclaim: %+v", other)
	}
	ids, err := d.Executor().JobHeartbeat(ctx, &keeldriver.JobHeartbeatParams{
		Owner: "w", IDs: []int64{c[2].ID, c[1].ID, c[0].ID}, Fences: []int64{c[2].Fence, c[1].Fence, c[0].Fence + 1},
		LeaseDuration: time.Hour, Now: at(time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != c[2].ID {
		t.Fatalf("extended %v, want only %d", ids, c[2].ID)
	}
	if j := get(t, d, c[2].ID); !j.LeaseExpiresAt.Equal(t0.Add(time.Minute + time.Hour)) {
		t.Fatalf("lease: %v", j.LeaseExpiresAt)
	}
	if j := get(t, d, c[0].ID); !j.LeaseExpiresAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("wrong fence extended: %v", j.LeaseExpiresAt)
	}
	if _, err := d.Executor().JobHeartbeat(ctx, &keeldriver.JobHeartbeatParams{IDs: []int64{1}}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("mismatched lengths: %v", err)
	}
}

func TestPromote(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	soon, later, promoteAt := time.Now().Add(time.Hour), time.Now().Add(24*time.Hour), time.Now().Add(2*time.Hour)
	jobs := insert(t, d,
		&keeldriver.JobInsertParams{Kind: "k", Queue: "a", RunAt: &soon},
		&keeldriver.JobInsertParams{Kind: "k", Queue: "b", RunAt: &later},
		job("c"), job("d"),
	)
	if jobs[0].State != keeltype.JobStateScheduled {
		t.Fatalf("future run_at inserted as %s", jobs[0].State)
	}
	// Make c unknown (due at +1m, needs check) and d waiting (deadline +1m).
	c := claim(t, d, "c", "w", 1, at(0))[0]
	w := claim(t, d, "d", "w", 1, at(0))[0]
	finish(t, d,
		&keeldriver.JobFinishParams{ID: c.ID, Fence: c.Fence, State: keeltype.JobStateUnknown, RunAt: at(time.Minute), NeedsCheck: true},
		&keeldriver.JobFinishParams{ID: w.ID, Fence: w.Fence, State: keeltype.JobStateWaiting, WaitReason: "signal", WaitDeadline: at(time.Minute)},
	)
	queues, err := d.Executor().JobPromote(ctx, &keeldriver.JobPromoteParams{Now: &promoteAt})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(queues, ",") != "a,c,d" {
		t.Fatalf("queues: %v", queues)
	}
	if j := get(t, d, jobs[0].ID); j.State != keeltype.JobStateAvailable {
		t.Fatalf("scheduled: %s", j.State)
	}
	if j := get(t, d, jobs[1].ID); j.State != keeltype.JobStateScheduled {
		t.Fatalf("not due: %s", j.State)
	}
	if j := get(t, d, c.ID); j.State != keeltype.JobStateAvailable || !j.NeedsCheck {
		t.Fatalf("unknown: %+v", j)
	}
	if j := get(t, d, w.ID); j.State != keeltype.JobStateAvailable || j.WaitReason != "signal" {
		t.Fatalf("waiting: %+v", j)
	}
	if q, _ := d.Executor().JobPromote(ctx, &keeldriver.JobPromoteParams{Now: &promoteAt}); len(q) != 0 {
		t.Fatalf("second promote: %v", q)
	}
}

func TestRescue(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	insert(t, d, job("q"), &keeldriver.JobInsertParams{Kind: "k", Queue: "q", MaxAttempts: 1, RunAt: at(-time.Hour)}, job("q"))
	c := claim(t, d, "q", "w1", 3, at(0)) // leases expire at +1m
	if _, err := d.Executor().JobHeartbeat(ctx, &keeldriver.JobHeartbeatParams{
		Owner: "w1", IDs: []int64{c[2].ID}, Fences: []int64{c[2].Fence}, LeaseDuration: time.Hour, Now: at(0),
	}); err != nil {
		t.Fatal(err)
	}
	rescued, err := d.Executor().JobRescue(ctx, &keeldriver.JobRescueParams{Now: at(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rescued) != 2 {
		t.Fatalf("rescued %d", len(rescued))
	}
	avail, manual := rescued[0], rescued[1]
	if avail.State != keeltype.JobStateAvailable || !avail.NeedsCheck || avail.LeaseOwner != "" || avail.LeaseExpiresAt != nil {
		t.Fatalf("rescued to available: %+v", avail)
	}
	if manual.State != keeltype.JobStateManual {
		t.Fatalf("budget spent: %+v", manual)
	}
	e := avail.Errors[0]
	if e.Class != keeltype.ErrorClassLeaseExpired || e.Message != "lease expired (owner w1)" || e.Fence != 1 || e.Attempt != 1 ||
		!e.At.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("error entry: %+v", e)
	}
	if j := get(t, d, c[2].ID); j.State != keeltype.JobStateRunning {
		t.Fatalf("live lease rescued: %s", j.State)
	}
	// The old owner's fence is now stale.
	res := finish(t, d, &keeldriver.JobFinishParams{ID: avail.ID, Fence: 1, State: keeltype.JobStateCompleted})
	if res[0].Applied {
		t.Fatal("stale owner completed a rescued job")
	}
	// Reclaiming bumps the fence.
	if again := claim(t, d, "q", "w2", 1, at(3*time.Minute)); len(again) != 1 || again[0].Fence != 2 || again[0].Attempt != 2 {
		t.Fatalf("reclaim: %+v", again)
	}
}

func TestCancel(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	jobs := insert(t, d, job("q"), job("r"))
	run := claim(t, d, "r", "w", 1, at(0))[0]
	got, err := d.Executor().JobCancel(ctx, &keeldriver.JobCancelParams{ID: jobs[0].ID, Now: at(0)})
	if err != nil || got.State != keeltype.JobStateCancelled || !got.FinalizedAt.Equal(t0) {
		t.Fatalf("cancel available: %+v %v", got, err)
	}
	got, err = d.Executor().JobCancel(ctx, &keeldriver.JobCancelParams{ID: run.ID})
	if err != nil || got.State != keeltype.JobStateRunning || !got.CancelRequested || got.FinalizedAt != nil {
		t.Fatalf("cancel running: %+v %v", got, err)
	}
	_, err = d.Executor().JobCancel(ctx, &keeldriver.JobCancelParams{ID: jobs[0].ID})
	var ise *keeltype.InvalidStateError
	if !errors.As(err, &ise) || ise.Action != "cancel" || ise.State != keeltype.JobStateCancelled || ise.JobID != jobs[0].ID {
		t.Fatalf("cancel final: %v", err)
	}
	if _, err := d.Executor().JobCancel(ctx, &keeldriver.JobCancelParams{ID: 12345}); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("cancel missing: %v", err)
	}
	// Finishing clears the request.
	finish(t, d, &keeldriver.JobFinishParams{ID: run.ID, Fence: run.Fence, State: keeltype.JobStateCancelled})
	if j := get(t, d, run.ID); j.CancelRequested || j.State != keeltype.JobStateCancelled {
		t.Fatalf("after finish: %+v", j)
	}
}

func TestRetry(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	insert(t, d, &keeldriver.JobInsertParams{Kind: "k", Queue: "q", MaxAttempts: 1, RunAt: at(-time.Hour)}, job("q"))
	c := claim(t, d, "q", "w", 2, at(0))
	finish(t, d,
		&keeldriver.JobFinishParams{ID: c[0].ID, Fence: c[0].Fence, State: keeltype.JobStateManual,
			Error: &keeltype.AttemptError{Class: keeltype.ErrorClassPermanent, Message: "no"}},
		&keeldriver.JobFinishParams{ID: c[1].ID, Fence: c[1].Fence, State: keeltype.JobStateCompleted},
	)
	got, err := d.Executor().JobRetry(ctx, &keeldriver.JobRetryParams{ID: c[0].ID, Now: at(time.Hour)})
	if err != nil || got.State != keeltype.JobStateAvailable || got.MaxAttempts != 2 || !got.RunAt.Equal(t0.Add(time.Hour)) ||
		got.FinalizedAt != nil || got.NeedsCheck || len(got.Errors) != 1 {
		t.Fatalf("retry manual: %+v %v", got, err)
	}
	var ise *keeltype.InvalidStateError
	for _, id := range []int64{c[0].ID, c[1].ID} { // available now, completed
		if _, err := d.Executor().JobRetry(ctx, &keeldriver.JobRetryParams{ID: id}); !errors.As(err, &ise) || ise.Action != "retry" {
			t.Fatalf("retry %d: %v", id, err)
		}
	}
	if _, err := d.Executor().JobRetry(ctx, &keeldriver.JobRetryParams{ID: 999}); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("retry missing: %v", err)
	}
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	jobs := insert(t, d, job("q"), job("r"))
	run := claim(t, d, "r", "w", 1, nil)[0]
	got, err := d.Executor().JobDelete(ctx, jobs[0].ID)
	if err != nil || got.ID != jobs[0].ID {
		t.Fatalf("delete: %+v %v", got, err)
	}
	if _, err := d.Executor().JobGet(ctx, jobs[0].ID); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	var ise *keeltype.InvalidStateError
	if _, err := d.Executor().JobDelete(ctx, run.ID); !errors.As(err, &ise) || ise.Action != "delete" || ise.State != keeltype.JobStateRunning {
		t.Fatalf("delete running: %v", err)
	}
	if _, err := d.Executor().JobDelete(ctx, jobs[0].ID); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("delete missing: %v", err)
	}
}

func TestWake(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	var params []*keeldriver.JobInsertParams
	for range 4 {
		params = append(params, &keeldriver.JobInsertParams{Kind: "k", Queue: "q", FlowKey: "flow", RunAt: at(-time.Hour)})
	}
	insert(t, d, params...)
	c := claim(t, d, "q", "w", 4, at(0))
	reasons := []string{"a", "a", "b", "b"}
	for i, j := range c {
		finish(t, d, &keeldriver.JobFinishParams{ID: j.ID, Fence: j.Fence, State: keeltype.JobStateWaiting,
			WaitReason: reasons[i], WaitDeadline: at(time.Hour)})
	}
	ids, err := d.Executor().JobWake(ctx, &keeldriver.JobWakeParams{IDs: []int64{c[3].ID, 777}, Now: at(time.Minute)})
	if err != nil || len(ids) != 1 || ids[0] != c[3].ID {
		t.Fatalf("wake by id: %v %v", ids, err)
	}
	if j := get(t, d, c[3].ID); j.State != keeltype.JobStateAvailable || j.WaitReason != "" || j.WaitDeadline != nil {
		t.Fatalf("woken: %+v", j)
	}
	ids, err = d.Executor().JobWake(ctx, &keeldriver.JobWakeParams{FlowKey: "flow", WaitReason: "a"})
	if err != nil || len(ids) != 2 || ids[0] != c[0].ID || ids[1] != c[1].ID {
		t.Fatalf("wake by flow+reason: %v %v", ids, err)
	}
	ids, err = d.Executor().JobWake(ctx, &keeldriver.JobWakeParams{FlowKey: "flow"})
	if err != nil || len(ids) != 1 || ids[0] != c[2].ID {
		t.Fatalf("wake by flow: %v %v", ids, err)
	}
	if _, err := d.Executor().JobWake(ctx, &keeldriver.JobWakeParams{}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("empty wake: %v", err)
	}
}

func TestPrune(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	insert(t, d, job("q"), job("q"), job("q"), job("q"))
	c := claim(t, d, "q", "w", 4, at(0))
	for i, j := range c[:3] {
		finish(t, d, &keeldriver.JobFinishParams{ID: j.ID, Fence: j.Fence, State: keeltype.JobStateCompleted, Now: at(time.Duration(i) * time.Hour)})
	}
	n, err := d.Executor().JobPrune(ctx, &keeldriver.JobPruneParams{Before: t0.Add(90 * time.Minute), Max: 1})
	if err != nil || n != 1 {
		t.Fatalf("prune max 1: %d %v", n, err)
	}
	n, err = d.Executor().JobPrune(ctx, &keeldriver.JobPruneParams{Before: t0.Add(90 * time.Minute), Max: 10})
	if err != nil || n != 1 {
		t.Fatalf("prune rest: %d %v", n, err)
	}
	left, _ := d.Executor().JobList(ctx, &keeldriver.JobListParams{})
	if len(left) != 2 || left[0].ID != c[2].ID || left[1].ID != c[3].ID {
		t.Fatalf("left: %d", len(left))
	}
}

func TestJobList(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	var params []*keeldriver.JobInsertParams
	for i := range 10 {
		params = append(params, &keeldriver.JobInsertParams{Kind: fmt.Sprintf("k%d", i%2), Queue: fmt.Sprintf("q%d", i%3),
			FlowKey: "f", BatchID: int64(i % 2), RunAt: at(-time.Hour)})
	}
	jobs := insert(t, d, params...)
	ex := d.Executor()
	page, _ := ex.JobList(ctx, &keeldriver.JobListParams{Limit: 4})
	if len(page) != 4 || page[0].ID != jobs[0].ID {
		t.Fatalf("first page: %d", len(page))
	}
	page, _ = ex.JobList(ctx, &keeldriver.JobListParams{Limit: 4, AfterID: page[3].ID})
	if len(page) != 4 || page[0].ID != jobs[4].ID {
		t.Fatal("second page")
	}
	page, _ = ex.JobList(ctx, &keeldriver.JobListParams{Desc: true, Limit: 3})
	if len(page) != 3 || page[0].ID != jobs[9].ID || page[2].ID != jobs[7].ID {
		t.Fatal("desc page")
	}
	page, _ = ex.JobList(ctx, &keeldriver.JobListParams{Desc: true, BeforeID: jobs[7].ID})
	if len(page) != 7 || page[0].ID != jobs[6].ID {
		t.Fatal("desc second page")
	}
	page, _ = ex.JobList(ctx, &keeldriver.JobListParams{Kinds: []string{"k1"}, Queues: []string{"q0", "q1"}, BatchID: 1, FlowKey: "f"})
	for _, j := range page {
		if j.Kind != "k1" || j.Queue == "q2" || j.BatchID != 1 {
			t.Fatalf("filter leak: %+v", j)
		}
	}
	if len(page) != 4 { // i = 1, 3, 7, 9
		t.Fatalf("filtered: %d", len(page))
	}
	claim(t, d, "q0", "w", 1, nil)
	page, _ = ex.JobList(ctx, &keeldriver.JobListParams{States: []keeltype.JobState{keeltype.JobStateRunning}})
	if len(page) != 1 || page[0].Queue != "q0" {
		t.Fatalf("state filter: %d", len(page))
	}
	if page, _ := ex.JobList(ctx, &keeldriver.JobListParams{FlowKey: "none"}); len(page) != 0 {
		t.Fatal("flow filter")
	}
}

func TestQueueListAndStats(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	insert(t, d, job("a"), job("a"), &keeldriver.JobInsertParams{Kind: "k", Queue: "b", RunAt: at(100 * 24 * 365 * time.Hour)})
	claim(t, d, "a", "w", 1, nil)
	ex := d.Executor()
	if _, err := ex.QueuePause(ctx, &keeldriver.QueuePauseParams{Name: "empty", By: "x"}); err != nil {
		t.Fatal(err)
	}
	// Pausing again keeps the original pauser.
	if row, _ := ex.QueuePause(ctx, &keeldriver.QueuePauseParams{Name: "empty", By: "y"}); row.PausedBy != "x" {
		t.Fatalf("re-pause: %+v", row)
	}
	rows, err := ex.QueueList(ctx)
	if err != nil || len(rows) != 3 || rows[0].Name != "a" || rows[2].Name != "empty" || rows[2].PausedAt == nil || rows[0].CreatedAt.IsZero() {
		t.Fatalf("list: %+v %v", rows, err)
	}
	stats, err := ex.QueueStats(ctx)
	if err != nil || len(stats) != 3 {
		t.Fatalf("stats: %+v %v", stats, err)
	}
	a, b, e := stats[0], stats[1], stats[2]
	if a.Queue != "a" || a.Counts[keeltype.JobStateAvailable] != 1 || a.Counts[keeltype.JobStateRunning] != 1 ||
		a.OldestAvailable == nil || !a.OldestAvailable.Equal(t0.Add(-time.Hour)) || a.Paused {
		t.Fatalf("a: %+v", a)
	}
	if b.Counts[keeltype.JobStateScheduled] != 1 || b.OldestAvailable != nil {
		t.Fatalf("b: %+v", b)
	}
	if e.Queue != "empty" || !e.Paused || e.Counts[keeltype.JobStateAvailable] != 0 {
		t.Fatalf("empty: %+v", e)
	}
}

func TestLeader(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	ex := d.Executor()
	elect := func(id string, now time.Duration) bool {
		ok, err := ex.LeaderAttemptElect(ctx, &keeldriver.LeaderElectParams{Name: "main", LeaderID: id, TTL: time.Minute, Now: at(now)})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if _, err := ex.LeaderGet(ctx, "main"); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("get before: %v", err)
	}
	if !elect("a", 0) || elect("b", 30*time.Second) {
		t.Fatal("exclusivity")
	}
	if !elect("a", 50*time.Second) { // re-elect extends to 1m50s
		t.Fatal("re-elect")
	}
	if elect("b", 100*time.Second) {
		t.Fatal("took an extended lease")
	}
	row, err := ex.LeaderGet(ctx, "main")
	if err != nil || row.LeaderID != "a" || !row.ElectedAt.Equal(t0) || !row.ExpiresAt.Equal(t0.Add(110*time.Second)) {
		t.Fatalf("get: %+v %v", row, err)
	}
	if !elect("b", 111*time.Second) {
		t.Fatal("expired lease not taken over")
	}
	// Resign by a non-holder does nothing; by the holder frees it.
	if err := ex.LeaderResign(ctx, &keeldriver.LeaderElectParams{Name: "main", LeaderID: "a"}); err != nil {
		t.Fatal(err)
	}
	if row, _ := ex.LeaderGet(ctx, "main"); row.LeaderID != "b" {
		t.Fatal("non-holder resigned")
	}
	if err := ex.LeaderResign(ctx, &keeldriver.LeaderElectParams{Name: "main", LeaderID: "b"}); err != nil {
		t.Fatal(err)
	}
	if !elect("a", 112*time.Second) {
		t.Fatal("resigned lease not free")
	}
}

func TestAudit(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	ex := d.Executor()
	rows := []keeltype.AuditRow{
		{At: t0, Actor: "user:alice", Action: "queue.pause", Target: "queue:a"},
		{At: t0.Add(time.Minute), Actor: "user:bob", Action: "job.cancel", Target: "job:1", Context: json.RawMessage(`{"n": 1}`)},
		{At: t0.Add(2 * time.Minute), Actor: "user:alice", Action: "queue.resume", Target: "queue:a", Reason: "ok"},
	}
	var ids []int64
	for i := range rows {
		got, err := ex.AuditInsert(ctx, &rows[i])
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got.ID)
	}
	list := func(p keeldriver.AuditListParams) []int64 {
		got, err := ex.AuditList(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, r := range got {
			out = append(out, r.ID)
		}
		return out
	}
	check := func(name string, got []int64, want ...int64) {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: got %v want %v", name, got, want)
		}
	}
	check("all", list(keeldriver.AuditListParams{}), ids[2], ids[1], ids[0])
	check("prefix", list(keeldriver.AuditListParams{Action: "queue."}), ids[2], ids[0])
	check("actor", list(keeldriver.AuditListParams{Actor: "user:bob"}), ids[1])
	check("target", list(keeldriver.AuditListParams{Target: "queue:a", BeforeID: ids[2]}), ids[0])
	check("window", list(keeldriver.AuditListParams{Since: at(time.Minute), Until: at(time.Minute)}), ids[1])
	check("limit", list(keeldriver.AuditListParams{Limit: 1}), ids[2])
	got, _ := ex.AuditList(ctx, &keeldriver.AuditListParams{Actor: "user:bob"})
	if string(got[0].Context) != `{"n":1}` || !got[0].At.Equal(t0.Add(time.Minute)) {
		t.Fatalf("row: %+v", got[0])
	}
}

func TestNotifyInProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d := openTest(t)
	l1, l2, deaf := d.Listener(), d.Listener(), d.Listener()
	for _, l := range []keeldriver.Listener{l1, l2} {
		if err := l.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Listen(ctx, "jobs"); err != nil {
			t.Fatal(err)
		}
	}
	if err := deaf.Listen(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	if err := d.Notify(ctx, "jobs", "q1"); err != nil {
		t.Fatal(err)
	}
	for _, l := range []keeldriver.Listener{l1, l2} {
		n, err := l.WaitForNotification(ctx)
		if err != nil || n.Topic != "jobs" || n.Payload != "q1" {
			t.Fatalf("notification: %+v %v", n, err)
		}
	}
	short, stop := context.WithTimeout(ctx, 20*time.Millisecond)
	defer stop()
	if _, err := deaf.WaitForNotification(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deaf listener: %v", err)
	}
	// A flood beyond the buffer drops messages but the listener still wakes.
	for i := range 5000 {
		_ = d.Notify(ctx, "jobs", fmt.Sprint(i))
	}
	if n, err := l1.WaitForNotification(ctx); err != nil || n.Payload != "0" {
		t.Fatalf("after flood: %+v %v", n, err)
	}
	// Close wakes a blocked waiter.
	done := make(chan error, 1)
	go func() {
		_ = deaf.Unlisten(ctx, "other")
		_, err := deaf.WaitForNotification(ctx)
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	_ = deaf.Close(ctx)
	if err := <-done; !errors.Is(err, keeldriver.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	_ = d.Close()
	if _, err := l2.WaitForNotification(ctx); !errors.Is(err, keeldriver.ErrClosed) {
		t.Fatalf("after driver close: %v", err)
	}
	if err := d.Notify(ctx, "jobs", "x"); !errors.Is(err, keeldriver.ErrClosed) {
		t.Fatalf("notify after close: %v", err)
	}
	if _, err := d.Executor().JobGet(ctx, 1); !errors.Is(err, keeldriver.ErrClosed) {
		t.Fatalf("executor after close: %v", err)
	}
}

// TestConcurrentWriters runs inserts, claims, heartbeats and finishes from
// many goroutines on one Driver: they queue for its single write connection,
// so none sees SQLITE_BUSY.
func TestConcurrentWriters(t *testing.T) {
	d := openTest(t)
	const workers = 8
	runChurn(t, []*Driver{d}, workers)
	assertCompleted(t, d, workers*churnRounds*5)
}

// TestTwoDriversOneFile is two processes sharing a file: their writers meet
// in SQLite's lock, where BEGIN IMMEDIATE and busy_timeout make the second
// one wait instead of failing. SQLite's busy handler is not fair, so the load
// is kept to one worker per driver (each waits at most for the other's run).
func TestTwoDriversOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keel.db")
	d1 := openFile(t, path)
	migrate(t, d1)
	d2 := openFile(t, path)
	runChurn(t, []*Driver{d1, d2}, 2)
	assertCompleted(t, d2, 2*churnRounds*5)
}

func runChurn(t *testing.T, drivers []*Driver, workers int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		d := drivers[w%len(drivers)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := churn(d, fmt.Sprintf("w%d", w)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func assertCompleted(t *testing.T, d *Driver, want int64) {
	t.Helper()
	// QueueStats counts live jobs only; completed ones are listed.
	var n, after int64
	for {
		rows, err := d.Executor().JobList(context.Background(), &keeldriver.JobListParams{
			States: []keeltype.JobState{keeltype.JobStateCompleted}, AfterID: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		n += int64(len(rows))
		if len(rows) < 1000 {
			break
		}
		after = rows[len(rows)-1].ID
	}
	if n != want {
		t.Fatalf("completed %d, want %d", n, want)
	}
}

const churnRounds = 10

// churn inserts, claims, heartbeats and completes five jobs per round, then
// drains what other workers left behind so the total is exact.
func churn(d *Driver, owner string) error {
	ctx := context.Background()
	ex := d.Executor()
	for range churnRounds {
		params := make([]*keeldriver.JobInsertParams, 5)
		for i := range params {
			params[i] = &keeldriver.JobInsertParams{Kind: "k", Queue: "q", Args: json.RawMessage(`{"o":"` + owner + `"}`)}
		}
		if _, err := ex.JobInsertMany(ctx, params); err != nil {
			return err
		}
		jobs, err := ex.JobClaim(ctx, &keeldriver.JobClaimParams{Queue: "q", Owner: owner, Max: 5, LeaseDuration: time.Minute})
		if err != nil {
			return err
		}
		var fin []*keeldriver.JobFinishParams
		hb := &keeldriver.JobHeartbeatParams{Owner: owner, LeaseDuration: time.Minute}
		for _, j := range jobs {
			hb.IDs, hb.Fences = append(hb.IDs, j.ID), append(hb.Fences, j.Fence)
			fin = append(fin, &keeldriver.JobFinishParams{ID: j.ID, Fence: j.Fence, State: keeltype.JobStateCompleted})
		}
		if _, err := ex.JobHeartbeat(ctx, hb); err != nil {
			return err
		}
		if _, err := ex.JobFinishMany(ctx, fin); err != nil {
			return err
		}
		if _, err := ex.JobGet(ctx, 1); err != nil && !errors.Is(err, keeltype.ErrNotFound) {
			return err
		}
	}
	for {
		jobs, err := ex.JobClaim(ctx, &keeldriver.JobClaimParams{Queue: "q", Owner: owner, Max: 50, LeaseDuration: time.Minute})
		if err != nil || len(jobs) == 0 {
			return err
		}
		var fin []*keeldriver.JobFinishParams
		for _, j := range jobs {
			fin = append(fin, &keeldriver.JobFinishParams{ID: j.ID, Fence: j.Fence, State: keeltype.JobStateCompleted})
		}
		if _, err := ex.JobFinishMany(ctx, fin); err != nil {
			return err
		}
	}
}

func TestTransactions(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)

	// A caller's transaction: engine statements join it; Commit/Rollback on
	// the wrapper are no-ops.
	tx, err := d.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ex := d.UnwrapExecutor(tx)
	jobs, err := ex.JobInsertMany(ctx, []*keeldriver.JobInsertParams{job("q")})
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.JobGet(ctx, jobs[0].Job.ID); err != nil {
		t.Fatalf("own write invisible in tx: %v", err)
	}
	if d.UnwrapTx(ex) != tx {
		t.Fatal("UnwrapTx")
	}
	// A savepoint inside it rolls back alone.
	sp, err := ex.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sp.JobInsertMany(ctx, []*keeldriver.JobInsertParams{job("sp")}); err != nil {
		t.Fatal(err)
	}
	if err := sp.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Executor().JobGet(ctx, jobs[0].Job.ID); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("rolled-back insert visible: %v", err)
	}

	// Executor.Begin: a real transaction, committed.
	btx, err := d.Executor().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer btx.Rollback(ctx)
	res, err := btx.JobInsertMany(ctx, []*keeldriver.JobInsertParams{job("q")})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := btx.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inner.JobInsertMany(ctx, []*keeldriver.JobInsertParams{job("inner")}); err != nil {
		t.Fatal(err)
	}
	if err := inner.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if d.UnwrapTx(btx) == nil {
		t.Fatal("UnwrapTx of Begin")
	}
	if err := btx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := btx.Rollback(ctx); err != nil {
		t.Fatalf("rollback after commit: %v", err)
	}
	if j := get(t, d, res[0].Job.ID); j.Queue != "q" {
		t.Fatal("committed insert missing")
	}
	if list, _ := d.Executor().JobList(ctx, &keeldriver.JobListParams{Queues: []string{"inner"}}); len(list) != 1 {
		t.Fatal("released savepoint lost")
	}
}

func TestOpenRejectsMemory(t *testing.T) {
	if _, err := Open(":memory:", nil); err == nil {
		t.Fatal("expected an error")
	}
}

func TestNewWithCallerDB(t *testing.T) {
	ctx := context.Background()
	owner := openTest(t)
	d, err := New(owner.DB(), nil)
	if err != nil {
		t.Fatal(err)
	}
	insert(t, d, job("q"))
	if got := claim(t, d, "q", "w", 1, nil); len(got) != 1 {
		t.Fatal("claim through New")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// The caller's DB is still open.
	if _, err := owner.Executor().JobGet(ctx, 1); err != nil {
		t.Fatal(err)
	}
}
