package keeldrivertest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// testPromote: due scheduled, retryable and unknown jobs and waiting jobs
// past their deadline become available (unknown keeps needs_check, an
// expired wait keeps its reason); the distinct queues touched come back.
func testPromote(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	now := time.Now()
	soon, later, promoteAt := now.Add(time.Hour), now.Add(24*time.Hour), now.Add(2*time.Hour)
	jobs := insert(t, ex,
		&keeldriver.JobInsertParams{Kind: "k", Queue: "a", RunAt: &soon},
		&keeldriver.JobInsertParams{Kind: "k", Queue: "b", RunAt: &later},
		job("c"), job("d"), job("e"), job("f"),
	)
	if jobs[0].State != keeltype.JobStateScheduled || jobs[1].State != keeltype.JobStateScheduled {
		t.Fatalf("future run_at inserted as %s, %s", jobs[0].State, jobs[1].State)
	}
	u := claim(t, ex, "c", "w", 1, at(0))[0]
	w := claim(t, ex, "d", "w", 1, at(0))[0]
	r := claim(t, ex, "e", "w", 1, at(0))[0]
	forever := claim(t, ex, "f", "w", 1, at(0))[0]
	finish(t, ex,
		&keeldriver.JobFinishParams{ID: u.ID, Fence: u.Fence, State: keeltype.JobStateUnknown, RunAt: &soon, NeedsCheck: true},
		&keeldriver.JobFinishParams{ID: w.ID, Fence: w.Fence, State: keeltype.JobStateWaiting, WaitReason: "signal",
			WaitDeadline: &soon, AttemptDelta: -1},
		&keeldriver.JobFinishParams{ID: r.ID, Fence: r.Fence, State: keeltype.JobStateRetryable, RunAt: &soon},
		&keeldriver.JobFinishParams{ID: forever.ID, Fence: forever.Fence, State: keeltype.JobStateWaiting, WaitReason: "manual",
			AttemptDelta: -1},
	)
	if queues, err := ex.JobPromote(ctx, &keeldriver.JobPromoteParams{Max: 10}); err != nil || len(queues) != 0 {
		t.Fatalf("promoted early: %v %v", queues, err)
	}
	if j := get(t, ex, w.ID); j.State != keeltype.JobStateWaiting || j.Attempt != 0 || j.WaitReason != "signal" || j.WaitDeadline == nil {
		t.Fatalf("waiting row: %+v", j)
	}
	// Max bounds one call.
	first, err := ex.JobPromote(ctx, &keeldriver.JobPromoteParams{Max: 1, Now: &promoteAt})
	if err != nil || len(first) != 1 {
		t.Fatalf("promote max 1: %v %v", first, err)
	}
	rest, err := ex.JobPromote(ctx, &keeldriver.JobPromoteParams{Now: &promoteAt})
	if err != nil {
		t.Fatal(err)
	}
	all := append(first, rest...)
	slices.Sort(all)
	if !slices.Equal(all, []string{"a", "c", "d", "e"}) || !slices.IsSorted(rest) {
		t.Fatalf("queues: %v then %v", first, rest)
	}
	for _, id := range []int64{jobs[0].ID, u.ID, w.ID, r.ID} {
		if j := get(t, ex, id); j.State != keeltype.JobStateAvailable {
			t.Fatalf("job %d in %s: %s", id, j.Queue, j.State)
		}
	}
	if j := get(t, ex, jobs[1].ID); j.State != keeltype.JobStateScheduled {
		t.Fatalf("not due: %s", j.State)
	}
	if j := get(t, ex, u.ID); !j.NeedsCheck {
		t.Fatal("unknown job lost needs_check")
	}
	if j := get(t, ex, w.ID); j.WaitReason != "signal" {
		t.Fatalf("expired wait lost its reason: %+v", j)
	}
	if j := get(t, ex, forever.ID); j.State != keeltype.JobStateWaiting {
		t.Fatalf("wait without deadline promoted: %s", j.State)
	}
	if q, err := ex.JobPromote(ctx, &keeldriver.JobPromoteParams{Now: &promoteAt}); err != nil || len(q) != 0 {
		t.Fatalf("second promote: %v %v", q, err)
	}
}

// testRescue: expired leases go back to available with needs_check and a
// lease_expired entry, or to manual when the budget is spent; live leases
// stay; the old fence is stale and a new claim gets a new one.
func testRescue(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	insert(t, ex, job("q"), &keeldriver.JobInsertParams{Kind: "k", Queue: "q", MaxAttempts: 1, RunAt: at(-time.Hour)}, job("q"), job("live"))
	// A lease taken on the database clock is live for the database clock.
	live := claim(t, ex, "live", "w0", 1, nil)[0]
	if rescued, err := ex.JobRescue(ctx, &keeldriver.JobRescueParams{Max: 10}); err != nil || len(rescued) != 0 {
		t.Fatalf("rescued live leases: %v %v", ids(rescued), err)
	}
	c := claim(t, ex, "q", "w1", 3, at(0)) // leases end at +1m
	if _, err := ex.JobHeartbeat(ctx, &keeldriver.JobHeartbeatParams{
		Owner: "w1", IDs: []int64{c[2].ID}, Fences: []int64{c[2].Fence}, LeaseDuration: time.Hour, Now: at(0),
	}); err != nil {
		t.Fatal(err)
	}
	if rescued, err := ex.JobRescue(ctx, &keeldriver.JobRescueParams{Now: at(30 * time.Second)}); err != nil || len(rescued) != 0 {
		t.Fatalf("rescued before expiry: %v %v", ids(rescued), err)
	}
	rescued, err := ex.JobRescue(ctx, &keeldriver.JobRescueParams{Max: 10, Now: at(2 * time.Minute)})
	if err != nil || len(rescued) != 2 {
		t.Fatalf("rescue: %v %v", ids(rescued), err)
	}
	byID := map[int64]*keeltype.JobRow{rescued[0].ID: rescued[0], rescued[1].ID: rescued[1]}
	avail, manual := byID[c[0].ID], byID[c[1].ID]
	if avail == nil || manual == nil {
		t.Fatalf("rescued %v, want %d and %d", ids(rescued), c[0].ID, c[1].ID)
	}
	if avail.State != keeltype.JobStateAvailable || !avail.NeedsCheck || avail.LeaseOwner != "" || avail.LeaseExpiresAt != nil ||
		avail.Fence != 1 || len(avail.Errors) != 1 {
		t.Fatalf("rescued to available: %+v", avail)
	}
	if e := avail.Errors[0]; e.Class != keeltype.ErrorClassLeaseExpired || e.Message != "lease expired (owner w1)" ||
		e.Fence != 1 || e.Attempt != 1 || !e.At.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("error entry: %+v", e)
	}
	if manual.State != keeltype.JobStateManual || manual.LeaseOwner != "" || manual.LeaseExpiresAt != nil {
		t.Fatalf("budget spent: %+v", manual)
	}
	if j := get(t, ex, c[2].ID); j.State != keeltype.JobStateRunning {
		t.Fatalf("live lease rescued: %s", j.State)
	}
	if j := get(t, ex, live.ID); j.State != keeltype.JobStateRunning {
		t.Fatalf("lease on the database clock rescued: %s", j.State)
	}
	// The old owner's fence is now stale.
	res := finish(t, ex, &keeldriver.JobFinishParams{ID: avail.ID, Fence: 1, State: keeltype.JobStateCompleted})
	if res[0] != (keeldriver.JobFinishResult{ID: avail.ID, CurrentState: keeltype.JobStateAvailable, CurrentFence: 1}) {
		t.Fatalf("stale owner's finish: %+v", res[0])
	}
	// Re-claiming gives a new fence and keeps needs_check for the worker.
	again := claim(t, ex, "q", "w2", 1, at(3*time.Minute))
	if len(again) != 1 || again[0].ID != avail.ID || again[0].Fence != 2 || again[0].Attempt != 2 || !again[0].NeedsCheck {
		t.Fatalf("reclaim: %+v", again)
	}
	// NeedsCheck is stored as given by the finish.
	if res := finish(t, ex, done(again[0], keeltype.JobStateCompleted, at(4*time.Minute))); !res[0].Applied {
		t.Fatalf("new owner's finish: %+v", res[0])
	}
	if j := get(t, ex, avail.ID); j.NeedsCheck || j.State != keeltype.JobStateCompleted {
		t.Fatalf("after the new owner's finish: %+v", j)
	}
}

// testCancel: an idle job is cancelled at once, a running one is asked to
// stop (and finishing it clears the request); final and missing jobs are
// refused with typed errors.
func testCancel(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	jobs := insert(t, ex, job("q"), job("r"))
	run := claim(t, ex, "r", "w", 1, at(0))[0]
	got, err := ex.JobCancel(ctx, &keeldriver.JobCancelParams{ID: jobs[0].ID, Now: at(0)})
	if err != nil || got.State != keeltype.JobStateCancelled || got.FinalizedAt == nil || !got.FinalizedAt.Equal(t0) {
		t.Fatalf("cancel available: %+v %v", got, err)
	}
	got, err = ex.JobCancel(ctx, &keeldriver.JobCancelParams{ID: run.ID})
	if err != nil || got.State != keeltype.JobStateRunning || !got.CancelRequested || got.FinalizedAt != nil || got.Fence != run.Fence {
		t.Fatalf("cancel running: %+v %v", got, err)
	}
	var ise *keeltype.InvalidStateError
	_, err = ex.JobCancel(ctx, &keeldriver.JobCancelParams{ID: jobs[0].ID})
	if !errors.As(err, &ise) || ise.Action != "cancel" || ise.State != keeltype.JobStateCancelled || ise.JobID != jobs[0].ID {
		t.Fatalf("cancel final: %v", err)
	}
	if _, err := ex.JobCancel(ctx, &keeldriver.JobCancelParams{ID: 424242}); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("cancel missing: %v", err)
	}
	// Finishing clears the request.
	finish(t, ex, done(run, keeltype.JobStateCancelled, nil))
	if j := get(t, ex, run.ID); j.CancelRequested || j.State != keeltype.JobStateCancelled {
		t.Fatalf("after finish: %+v", j)
	}
}

// testRetry: every retryable state becomes available now, a spent budget
// gets one more attempt; running, completed, available and missing jobs
// are refused.
func testRetry(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	jobs := insert(t, ex,
		&keeldriver.JobInsertParams{Kind: "k", Queue: "q", MaxAttempts: 1, RunAt: at(-time.Hour)},
		job("q"), job("q"), job("q"), job("q"), job("q"), job("q"), job("q"))
	c := claim(t, ex, "q", "w", 8, at(0))
	if len(c) != 8 {
		t.Fatalf("claimed %d", len(c))
	}
	cancelled, err := ex.JobCancel(ctx, &keeldriver.JobCancelParams{ID: c[7].ID})
	if err != nil || !cancelled.CancelRequested {
		t.Fatalf("cancel running: %+v %v", cancelled, err)
	}
	var ise *keeltype.InvalidStateError
	if _, err := ex.JobRetry(ctx, &keeldriver.JobRetryParams{ID: c[7].ID}); !errors.As(err, &ise) || ise.Action != "retry" ||
		ise.State != keeltype.JobStateRunning || ise.JobID != c[7].ID {
		t.Fatalf("retry running: %v", err)
	}
	finish(t, ex,
		&keeldriver.JobFinishParams{ID: c[0].ID, Fence: 1, State: keeltype.JobStateManual,
			Error: &keeltype.AttemptError{Class: keeltype.ErrorClassPermanent, Message: "no"}},
		done(c[1], keeltype.JobStateCompleted, nil),
		done(c[2], keeltype.JobStateFailed, nil),
		&keeldriver.JobFinishParams{ID: c[3].ID, Fence: 1, State: keeltype.JobStateRetryable, RunAt: at(time.Hour)},
		&keeldriver.JobFinishParams{ID: c[4].ID, Fence: 1, State: keeltype.JobStateWaiting, WaitReason: "x", AttemptDelta: -1},
		&keeldriver.JobFinishParams{ID: c[5].ID, Fence: 1, State: keeltype.JobStateUnknown, RunAt: at(time.Hour), NeedsCheck: true},
		&keeldriver.JobFinishParams{ID: c[6].ID, Fence: 1, State: keeltype.JobStateScheduled, RunAt: at(time.Hour)},
		&keeldriver.JobFinishParams{ID: c[7].ID, Fence: 1, State: keeltype.JobStateManual,
			Error: &keeltype.AttemptError{Class: keeltype.ErrorClassCancelled, Message: "stopped"}},
	)

	// The budget of the first job is spent: retry extends it by one.
	got, err := ex.JobRetry(ctx, &keeldriver.JobRetryParams{ID: c[0].ID, Now: at(time.Hour)})
	if err != nil || got.State != keeltype.JobStateAvailable || got.MaxAttempts != 2 || !got.RunAt.Equal(t0.Add(time.Hour)) ||
		got.FinalizedAt != nil || got.NeedsCheck || got.CancelRequested || len(got.Errors) != 1 || got.Fence != 1 {
		t.Fatalf("retry manual: %+v %v", got, err)
	}
	for _, j := range []*keeltype.JobRow{c[2], c[3], c[4], c[5], c[6], c[7]} {
		got, err := ex.JobRetry(ctx, &keeldriver.JobRetryParams{ID: j.ID})
		if err != nil || got.State != keeltype.JobStateAvailable || got.FinalizedAt != nil || got.MaxAttempts != jobs[1].MaxAttempts ||
			got.CancelRequested || got.WaitReason != "" || !near(got.RunAt) {
			t.Fatalf("retry job %d: %+v %v", j.ID, got, err)
		}
	}
	// Retry a job cancelled before it ever ran.
	idle := insert(t, ex, job("idle"))[0]
	if _, err := ex.JobCancel(ctx, &keeldriver.JobCancelParams{ID: idle.ID}); err != nil {
		t.Fatal(err)
	}
	if got, err := ex.JobRetry(ctx, &keeldriver.JobRetryParams{ID: idle.ID}); err != nil || got.State != keeltype.JobStateAvailable || got.FinalizedAt != nil {
		t.Fatalf("retry cancelled: %+v %v", got, err)
	}
	for _, id := range []int64{c[0].ID, c[1].ID} { // available now, completed
		if _, err := ex.JobRetry(ctx, &keeldriver.JobRetryParams{ID: id}); !errors.As(err, &ise) || ise.Action != "retry" || ise.JobID != id {
			t.Fatalf("retry %d: %v", id, err)
		}
	}
	if _, err := ex.JobRetry(ctx, &keeldriver.JobRetryParams{ID: 999999}); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("retry missing: %v", err)
	}
}

// testDelete: any job but a running one is deleted and returned.
func testDelete(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	jobs := insert(t, ex, job("q"), job("r"))
	run := claim(t, ex, "r", "w", 1, nil)[0]
	got, err := ex.JobDelete(ctx, jobs[0].ID)
	if err != nil || got.ID != jobs[0].ID || got.Queue != "q" {
		t.Fatalf("delete: %+v %v", got, err)
	}
	if _, err := ex.JobGet(ctx, jobs[0].ID); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	var ise *keeltype.InvalidStateError
	if _, err := ex.JobDelete(ctx, run.ID); !errors.As(err, &ise) || ise.Action != "delete" || ise.State != keeltype.JobStateRunning || ise.JobID != run.ID {
		t.Fatalf("delete running: %v", err)
	}
	if _, err := ex.JobDelete(ctx, jobs[0].ID); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("delete missing: %v", err)
	}
	finish(t, ex, done(run, keeltype.JobStateCompleted, nil))
	if got, err := ex.JobDelete(ctx, run.ID); err != nil || got.State != keeltype.JobStateCompleted {
		t.Fatalf("delete completed: %+v %v", got, err)
	}
}

// testWake: waiting jobs wake by ids (narrowed by flow key and reason when
// given), or by flow key (and reason); only waiting jobs wake, and a wake
// needs a filter.
func testWake(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	params := []*keeldriver.JobInsertParams{keyed("q", "flow", 2), keyed("q", "flow", 2), keyed("q", "flow", 2), keyed("q", "flow", 2), keyed("q", "other", 2)}
	insert(t, ex, params...)
	c := claim(t, ex, "q", "w", 5, at(0))
	for i, reason := range []string{"a", "a", "b", "b", "a"} {
		finish(t, ex, &keeldriver.JobFinishParams{ID: c[i].ID, Fence: c[i].Fence, State: keeltype.JobStateWaiting,
			WaitReason: reason, WaitDeadline: at(time.Hour), AttemptDelta: -1})
	}
	if _, err := ex.JobWake(ctx, &keeldriver.JobWakeParams{}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("wake without filter: %v", err)
	}
	woken, err := ex.JobWake(ctx, &keeldriver.JobWakeParams{IDs: []int64{c[3].ID, 777777}, Now: at(time.Minute)})
	if err != nil || !slices.Equal(woken, []int64{c[3].ID}) {
		t.Fatalf("wake by id: %v %v", woken, err)
	}
	if j := get(t, ex, c[3].ID); j.State != keeltype.JobStateAvailable || j.WaitReason != "" || j.WaitDeadline != nil || j.Attempt != 0 {
		t.Fatalf("woken row: %+v", j)
	}
	woken, err = ex.JobWake(ctx, &keeldriver.JobWakeParams{FlowKey: "flow", WaitReason: "a"})
	if err != nil || !slices.Equal(sorted(woken), []int64{c[0].ID, c[1].ID}) {
		t.Fatalf("wake by flow key and reason: %v %v", woken, err)
	}
	// Ids of jobs no longer waiting are ignored.
	woken, err = ex.JobWake(ctx, &keeldriver.JobWakeParams{IDs: []int64{c[0].ID, c[2].ID}})
	if err != nil || !slices.Equal(woken, []int64{c[2].ID}) {
		t.Fatalf("wake by ids: %v %v", woken, err)
	}
	if woken, err := ex.JobWake(ctx, &keeldriver.JobWakeParams{FlowKey: "flow"}); err != nil || len(woken) != 0 {
		t.Fatalf("nothing left waiting under the key: %v %v", woken, err)
	}
	if j := get(t, ex, c[4].ID); j.State != keeltype.JobStateWaiting {
		t.Fatalf("another key's job woke: %+v", j)
	}
	// A flow key or wait reason given with ids narrows them: c[4] waits
	// under "other" for "a".
	for _, p := range []*keeldriver.JobWakeParams{{IDs: []int64{c[4].ID}, WaitReason: "b"}, {IDs: []int64{c[4].ID}, FlowKey: "flow"}} {
		if woken, err := ex.JobWake(ctx, p); err != nil || len(woken) != 0 {
			t.Fatalf("wake %+v: %v %v, want nothing woken", p, woken, err)
		}
	}
	if j := get(t, ex, c[4].ID); j.State != keeltype.JobStateWaiting {
		t.Fatalf("a narrowed wake woke a job it excludes: %+v", j)
	}
	woken, err = ex.JobWake(ctx, &keeldriver.JobWakeParams{FlowKey: "other"})
	if err != nil || !slices.Equal(woken, []int64{c[4].ID}) {
		t.Fatalf("wake by flow key: %v %v", woken, err)
	}
}
