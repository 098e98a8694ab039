package keeldrivertest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// testInsert: defaults, explicit fields, idempotency within and across
// calls (per kind), results in input order, and all-or-nothing batches.
func testInsert(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	far := t0.Add(100 * 365 * 24 * time.Hour)
	res := insertResults(t, ex,
		&keeldriver.JobInsertParams{Kind: "email", IdempotencyKey: "k1", Args: json.RawMessage(`{"to": "a"}`)},
		&keeldriver.JobInsertParams{Kind: "email", Queue: "q", RunAt: &far, Priority: 4, MaxAttempts: 3,
			FlowKey: "f", BatchID: 7, Subject: "s", Metadata: json.RawMessage(`{"m": 1}`)},
		&keeldriver.JobInsertParams{Kind: "email", IdempotencyKey: "k1", Args: json.RawMessage(`{"to": "b"}`)},
		&keeldriver.JobInsertParams{Kind: "sms", IdempotencyKey: "k1"}, // same key, other kind
		&keeldriver.JobInsertParams{Kind: "email"},
	)
	if flags := []bool{res[0].Duplicate, res[1].Duplicate, res[2].Duplicate, res[3].Duplicate, res[4].Duplicate}; !slices.Equal(flags, []bool{false, false, true, false, false}) {
		t.Fatalf("duplicate flags: %v", flags)
	}
	if dup := res[2].Job; dup.ID != res[0].Job.ID || !sameJSON(dup.Args, []byte(`{"to":"a"}`)) {
		t.Fatalf("in-batch duplicate should be the original untouched: %+v", dup)
	}
	if res[3].Job.Kind != "sms" || res[1].Job.Queue != "q" || res[4].Job.IdempotencyKey != "" {
		t.Fatalf("results not in input order: %+v", res)
	}
	a := res[0].Job
	if a.Kind != "email" || a.Queue != "default" || a.Priority != 2 || a.MaxAttempts != 25 || string(a.Metadata) != "{}" ||
		a.State != keeltype.JobStateAvailable || a.IdempotencyKey != "k1" || len(a.Errors) != 0 ||
		a.Attempt != 0 || a.Fence != 0 || a.LeaseOwner != "" || a.LeaseExpiresAt != nil || a.AttemptedAt != nil ||
		a.FinalizedAt != nil || a.Result != nil || a.NeedsCheck || a.CancelRequested || a.WaitReason != "" ||
		a.FlowKey != "" || a.BatchID != 0 || a.Subject != "" {
		t.Fatalf("defaults: %+v", a)
	}
	if a.CreatedAt.Location() != time.UTC || a.RunAt.Location() != time.UTC || !near(a.RunAt) || !near(a.CreatedAt) {
		t.Fatalf("times: run_at %v created_at %v, want UTC and now", a.RunAt, a.CreatedAt)
	}
	b := res[1].Job
	if b.State != keeltype.JobStateScheduled || b.Queue != "q" || b.Priority != 4 || b.MaxAttempts != 3 ||
		b.FlowKey != "f" || b.BatchID != 7 || b.Subject != "s" || !b.RunAt.Equal(far) || !sameJSON(b.Metadata, []byte(`{"m":1}`)) {
		t.Fatalf("explicit fields: %+v", b)
	}

	// Across calls: the stored row comes back untouched; new ids grow.
	again := insertResults(t, ex,
		&keeldriver.JobInsertParams{Kind: "email", IdempotencyKey: "k1", Priority: 4},
		&keeldriver.JobInsertParams{Kind: "sms", IdempotencyKey: "k1"},
		&keeldriver.JobInsertParams{Kind: "email"},
	)
	if !again[0].Duplicate || again[0].Job.ID != a.ID || again[0].Job.Priority != 2 {
		t.Fatalf("second call, email k1: %+v %+v", again[0], again[0].Job)
	}
	if !again[1].Duplicate || again[1].Job.ID != res[3].Job.ID {
		t.Fatalf("second call, sms k1: %+v", again[1])
	}
	if again[2].Duplicate || again[2].Job.ID <= res[4].Job.ID {
		t.Fatalf("second call, new job: %+v", again[2].Job)
	}

	// A bad row fails the whole batch.
	_, err := ex.JobInsertMany(ctx, []*keeldriver.JobInsertParams{{Kind: "ok"}, {Kind: "bad", Args: json.RawMessage("{")}})
	if err == nil || !strings.Contains(err.Error(), "inserting jobs") {
		t.Fatalf("malformed args: %v", err)
	}
	if list, err := ex.JobList(ctx, &keeldriver.JobListParams{Kinds: []string{"ok", "bad"}}); err != nil || len(list) != 0 {
		t.Fatalf("failed batch left rows: %d %v", len(list), err)
	}
	if res, err := ex.JobInsertMany(ctx, nil); err != nil || len(res) != 0 {
		t.Fatalf("empty insert: %v %v", res, err)
	}
}

// testClaimOrderFenceAttempt: (priority, id) order, one queue only, fence
// and attempt +1, the lease, no re-claim of running jobs, and a snooze that
// gives the attempt back while the next claim still bumps the fence.
func testClaimOrderFenceAttempt(t *testing.T, e *env) {
	ex := e.ex
	jobs := insert(t, ex, keyed("q", "", 3), keyed("q", "", 1), job("q"), job("other"))
	got := claim(t, ex, "q", "w1", 2, at(0))
	if !slices.Equal(ids(got), []int64{jobs[1].ID, jobs[2].ID}) {
		t.Fatalf("claim order: %v, want %v", ids(got), []int64{jobs[1].ID, jobs[2].ID})
	}
	for _, j := range got {
		if j.State != keeltype.JobStateRunning || j.Attempt != 1 || j.Fence != 1 || j.LeaseOwner != "w1" ||
			j.LeaseExpiresAt == nil || !j.LeaseExpiresAt.Equal(t0.Add(time.Minute)) ||
			j.AttemptedAt == nil || !j.AttemptedAt.Equal(t0) || j.Queue != "q" {
			t.Fatalf("claimed row: %+v", j)
		}
	}
	// The database clock: a lease of LeaseDuration from now.
	got = claim(t, ex, "q", "w2", 10, nil)
	if len(got) != 1 || got[0].ID != jobs[0].ID {
		t.Fatalf("second claim: %v", ids(got))
	}
	if j := got[0]; j.AttemptedAt == nil || !near(*j.AttemptedAt) || j.LeaseExpiresAt == nil ||
		j.LeaseExpiresAt.Sub(*j.AttemptedAt) != time.Minute || j.Fence != 1 || j.LeaseOwner != "w2" {
		t.Fatalf("claimed with the database clock: %+v", j)
	}
	if more := claim(t, ex, "q", "w2", 10, nil); len(more) != 0 {
		t.Fatalf("claimed running jobs again: %v", ids(more))
	}
	if other := claim(t, ex, "other", "w", 10, nil); len(other) != 1 || other[0].ID != jobs[3].ID {
		t.Fatalf("other queue: %v", ids(other))
	}

	// Snooze gives the attempt back; the next claim bumps the fence again.
	first := jobs[1].ID
	r := finish(t, ex, &keeldriver.JobFinishParams{ID: first, Fence: 1, State: keeltype.JobStateAvailable,
		RunAt: at(0), AttemptDelta: -1, Now: at(time.Second)})
	if !r[0].Applied {
		t.Fatalf("snooze not applied: %+v", r[0])
	}
	again := claim(t, ex, "q", "w3", 1, at(time.Minute))
	if len(again) != 1 || again[0].ID != first || again[0].Fence != 2 || again[0].Attempt != 1 || again[0].LeaseOwner != "w3" {
		t.Fatalf("reclaim: %+v", again)
	}

	if got, err := ex.JobClaim(context.Background(), &keeldriver.JobClaimParams{Queue: "q", Owner: "w", Max: 0, LeaseDuration: time.Minute}); err != nil || len(got) != 0 {
		t.Fatalf("max 0: %v %v", ids(got), err)
	}
	if _, err := ex.JobClaim(context.Background(), &keeldriver.JobClaimParams{Queue: "q", Owner: "w", Max: 1}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("no lease duration: %v", err)
	}
}

// testClaimConcurrent: claimers racing on one queue never share a job and
// together take all of them.
func testClaimConcurrent(t *testing.T, e *env) {
	const total = 300
	params := make([]*keeldriver.JobInsertParams, total)
	for i := range params {
		params[i] = job("q")
	}
	insert(t, e.ex, params...)
	claimAllConcurrently(t, total, func(owner string) ([]*keeltype.JobRow, error) {
		return e.ex.JobClaim(context.Background(), &keeldriver.JobClaimParams{
			Queue: "q", Owner: owner, Max: 7, LeaseDuration: time.Minute,
		})
	})
}

// testPausedQueue: a paused queue claims nothing (others still do) until it
// is resumed.
func testPausedQueue(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	insert(t, ex, job("q"), job("other"))
	row, err := ex.QueuePause(ctx, &keeldriver.QueuePauseParams{Name: "q", By: "user:alice", Now: at(0)})
	if err != nil || row.Name != "q" || row.PausedAt == nil || !row.PausedAt.Equal(t0) || row.PausedBy != "user:alice" {
		t.Fatalf("pause: %+v %v", row, err)
	}
	if got := claim(t, ex, "q", "w", 10, nil); len(got) != 0 {
		t.Fatalf("claimed %d from a paused queue", len(got))
	}
	stats, err := ex.QueueStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(stats, func(s *keeltype.QueueStats) bool { return s.Queue == "q" })
	if i < 0 || !stats[i].Paused || stats[i].Counts[keeltype.JobStateAvailable] != 1 || stats[i].OldestAvailable == nil {
		t.Fatalf("stats of the paused queue: %+v", stats)
	}
	if got := claim(t, ex, "other", "w", 10, nil); len(got) != 1 {
		t.Fatal("pause leaked to another queue")
	}
	if row, err := ex.QueueResume(ctx, "q"); err != nil || row.PausedAt != nil || row.PausedBy != "" {
		t.Fatalf("resume: %+v %v", row, err)
	}
	if got := claim(t, ex, "q", "w", 10, nil); len(got) != 1 {
		t.Fatalf("claimed %d after resume", len(got))
	}
}

// testFinishFenced: each finish is conditioned on (id, fence, running);
// a stale or missing one changes nothing and says why.
func testFinishFenced(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	insert(t, ex, job("q"), job("q"), job("q"), job("q"))
	c := claim(t, ex, "q", "w", 4, at(0))
	a, b, cc, d := c[0], c[1], c[2], c[3]
	res := finish(t, ex,
		&keeldriver.JobFinishParams{ID: a.ID, Fence: a.Fence, State: keeltype.JobStateCompleted,
			Result: json.RawMessage(`{"ok": true}`), Now: at(time.Second)},
		&keeldriver.JobFinishParams{ID: b.ID, Fence: 0, State: keeltype.JobStateCompleted},
		&keeldriver.JobFinishParams{ID: d.ID, Fence: d.Fence + 5, State: keeltype.JobStateCompleted},
		&keeldriver.JobFinishParams{ID: 999999, Fence: 1, State: keeltype.JobStateCompleted},
		&keeldriver.JobFinishParams{ID: cc.ID, Fence: cc.Fence, State: keeltype.JobStateRetryable, RunAt: at(time.Hour),
			Error: &keeltype.AttemptError{Class: keeltype.ErrorClassRetryable, Message: "boom"}, Now: at(time.Second)},
	)
	want := []keeldriver.JobFinishResult{
		{ID: a.ID, Applied: true},
		{ID: b.ID, CurrentState: keeltype.JobStateRunning, CurrentFence: 1},
		{ID: d.ID, CurrentState: keeltype.JobStateRunning, CurrentFence: 1},
		{ID: 999999},
		{ID: cc.ID, Applied: true},
	}
	for i := range want {
		if res[i] != want[i] {
			t.Fatalf("result %d: got %+v want %+v", i, res[i], want[i])
		}
	}
	ja := get(t, ex, a.ID)
	if ja.State != keeltype.JobStateCompleted || ja.FinalizedAt == nil || !ja.FinalizedAt.Equal(t0.Add(time.Second)) ||
		ja.LeaseOwner != "" || ja.LeaseExpiresAt != nil || !sameJSON(ja.Result, []byte(`{"ok":true}`)) ||
		ja.Fence != 1 || ja.Attempt != 1 {
		t.Fatalf("completed row: %+v result %s", ja, ja.Result)
	}
	jc := get(t, ex, cc.ID)
	if jc.State != keeltype.JobStateRetryable || jc.FinalizedAt != nil || !jc.RunAt.Equal(t0.Add(time.Hour)) ||
		jc.LeaseOwner != "" || jc.LeaseExpiresAt != nil || len(jc.Errors) != 1 {
		t.Fatalf("retryable row: %+v", jc)
	}
	if e := jc.Errors[0]; e.Attempt != 1 || e.Fence != 1 || e.Class != keeltype.ErrorClassRetryable ||
		e.Message != "boom" || !e.At.Equal(t0.Add(time.Second)) {
		t.Fatalf("error entry: %+v", e)
	}
	// The same commit again is stale: the job is no longer running.
	res = finish(t, ex, &keeldriver.JobFinishParams{ID: a.ID, Fence: a.Fence, State: keeltype.JobStateFailed})
	if res[0] != (keeldriver.JobFinishResult{ID: a.ID, CurrentState: keeltype.JobStateCompleted, CurrentFence: 1}) {
		t.Fatalf("second finish: %+v", res[0])
	}
	// The right fence with the database clock.
	if res := finish(t, ex, done(d, keeltype.JobStateFailed, nil)); !res[0].Applied {
		t.Fatalf("finish with the right fence: %+v", res[0])
	}
	if jd := get(t, ex, d.ID); jd.State != keeltype.JobStateFailed || jd.FinalizedAt == nil || !near(*jd.FinalizedAt) {
		t.Fatalf("failed row: %+v", jd)
	}
	if _, err := ex.JobFinishMany(ctx, []*keeldriver.JobFinishParams{{ID: b.ID, Fence: 1, State: keeltype.JobStateRunning}}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("finish to running: %v", err)
	}
	if j := get(t, ex, b.ID); j.State != keeltype.JobStateRunning {
		t.Fatalf("refused finish changed the job: %+v", j)
	}
}

// testFinishSnoozeAndWait: snooze and wait give the attempt back; wait
// keeps its reason and deadline, and NeedsCheck is stored as given.
func testFinishSnoozeAndWait(t *testing.T, e *env) {
	ex := e.ex
	insert(t, ex, job("q"), job("q"))
	c := claim(t, ex, "q", "w", 2, at(0))
	res := finish(t, ex,
		&keeldriver.JobFinishParams{ID: c[0].ID, Fence: c[0].Fence, State: keeltype.JobStateAvailable, RunAt: at(time.Minute), AttemptDelta: -1},
		&keeldriver.JobFinishParams{ID: c[1].ID, Fence: c[1].Fence, State: keeltype.JobStateWaiting, AttemptDelta: -1,
			WaitReason: "approval", WaitDeadline: at(time.Hour), NeedsCheck: true},
	)
	if !res[0].Applied || !res[1].Applied {
		t.Fatalf("finish: %+v", res)
	}
	s := get(t, ex, c[0].ID)
	if s.State != keeltype.JobStateAvailable || s.Attempt != 0 || s.Fence != 1 || !s.RunAt.Equal(t0.Add(time.Minute)) ||
		s.LeaseOwner != "" || s.LeaseExpiresAt != nil || s.FinalizedAt != nil {
		t.Fatalf("snoozed: %+v", s)
	}
	w := get(t, ex, c[1].ID)
	if w.State != keeltype.JobStateWaiting || w.Attempt != 0 || w.WaitReason != "approval" || w.WaitDeadline == nil ||
		!w.WaitDeadline.Equal(t0.Add(time.Hour)) || !w.NeedsCheck || w.LeaseOwner != "" || w.FinalizedAt != nil {
		t.Fatalf("waiting: %+v", w)
	}
}

// testHeartbeat: only (owner, fence) pairs still running are extended.
func testHeartbeat(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	insert(t, ex, job("q"), job("q"), job("q"))
	c := claim(t, ex, "q", "w", 3, at(0))
	// The second job changes owner: made available again and re-claimed.
	finish(t, ex, done(c[1], keeltype.JobStateAvailable, nil))
	other := claim(t, ex, "q", "x", 1, at(0))
	if len(other) != 1 || other[0].ID != c[1].ID || other[0].Fence != 2 {
		t.Fatalf("reclaim: %+v", other)
	}
	got, err := ex.JobHeartbeat(ctx, &keeldriver.JobHeartbeatParams{
		Owner: "w", IDs: []int64{c[2].ID, c[1].ID, c[0].ID}, Fences: []int64{c[2].Fence, c[1].Fence, c[0].Fence + 1},
		LeaseDuration: time.Hour, Now: at(time.Minute),
	})
	if err != nil || !slices.Equal(got, []int64{c[2].ID}) {
		t.Fatalf("extended %v (%v), want only %d", got, err, c[2].ID)
	}
	if j := get(t, ex, c[2].ID); !j.LeaseExpiresAt.Equal(t0.Add(time.Minute + time.Hour)) {
		t.Fatalf("lease not extended: %v", j.LeaseExpiresAt)
	}
	if j := get(t, ex, c[0].ID); !j.LeaseExpiresAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("wrong fence extended: %v", j.LeaseExpiresAt)
	}
	if j := get(t, ex, c[1].ID); j.LeaseOwner != "x" || !j.LeaseExpiresAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("another owner's lease extended: %+v", j)
	}
	got, err = ex.JobHeartbeat(ctx, &keeldriver.JobHeartbeatParams{
		Owner: "intruder", IDs: []int64{c[2].ID}, Fences: []int64{c[2].Fence}, LeaseDuration: time.Minute,
	})
	if err != nil || len(got) != 0 {
		t.Fatalf("foreign heartbeat: %v %v", got, err)
	}
	// The database clock.
	got, err = ex.JobHeartbeat(ctx, &keeldriver.JobHeartbeatParams{
		Owner: "w", IDs: []int64{c[2].ID}, Fences: []int64{c[2].Fence}, LeaseDuration: time.Minute,
	})
	if err != nil || len(got) != 1 {
		t.Fatalf("heartbeat with the database clock: %v %v", got, err)
	}
	if j := get(t, ex, c[2].ID); !near(j.LeaseExpiresAt.Add(-time.Minute)) {
		t.Fatalf("lease from the database clock: %v", j.LeaseExpiresAt)
	}
	if _, err := ex.JobHeartbeat(ctx, &keeldriver.JobHeartbeatParams{Owner: "w", IDs: []int64{1}, LeaseDuration: time.Minute}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("mismatched lengths: %v", err)
	}
}
