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

func availableKeys(t *testing.T, ex keeldriver.Executor, queue, after string, limit int) []string {
	t.Helper()
	keys, err := ex.FlowKeysAvailable(context.Background(), &keeldriver.FlowKeysAvailableParams{Queue: queue, After: after, Limit: limit})
	if err != nil {
		t.Fatalf("FlowKeysAvailable(%s, %q, %d): %v", queue, after, limit, err)
	}
	return keys
}

// claimKeys claims for owner w1 at t0 with a one-minute lease.
func claimKeys(t *testing.T, ex keeldriver.Executor, queue string, keys []string, ns []int) []*keeltype.JobRow {
	t.Helper()
	rows, err := ex.JobClaimKeys(context.Background(), &keeldriver.JobClaimKeysParams{
		Queue: queue, Owner: "w1", LeaseDuration: time.Minute, Keys: keys, Ns: ns, Now: at(0),
	})
	if err != nil {
		t.Fatalf("JobClaimKeys(%s, %q, %v): %v", queue, keys, ns, err)
	}
	return rows
}

func keysOf(jobs []*keeltype.JobRow) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.FlowKey
	}
	return out
}

// testFlowKeysAvailable: distinct keys with available jobs in the queue,
// "" first when present, then key order from After wrapping around, at
// most Limit; scheduled, running and other queues' jobs do not count.
func testFlowKeysAvailable(t *testing.T, e *env) {
	ex := e.ex
	future := time.Now().Add(time.Hour)
	insert(t, ex,
		keyed("q", "d", 2), keyed("q", "b", 2), keyed("q", "b", 1), keyed("q", "a", 4),
		keyed("q", "c", 2), keyed("q", "", 2), keyed("q", "", 3), keyed("q", "a", 1),
		keyed("other", "x", 2), keyed("other", "a", 2),
		&keeldriver.JobInsertParams{Kind: "k", Queue: "q", FlowKey: "z", RunAt: &future}, // scheduled
	)
	// A key whose only job is running is not available.
	insert(t, ex, keyed("q", "e", 1), keyed("q2", "e", 1))
	if got := claimKeys(t, ex, "q", []string{"e"}, []int{5}); len(got) != 1 {
		t.Fatalf("claimed %d of key e", len(got))
	}
	claim(t, ex, "q2", "w", 1, nil)

	for _, c := range []struct {
		after string
		limit int
		want  []string
	}{
		{"", 10, []string{"", "a", "b", "c", "d"}},
		{"a", 10, []string{"", "b", "c", "d", "a"}},
		{"b", 10, []string{"", "c", "d", "a", "b"}},
		{"bb", 10, []string{"", "c", "d", "a", "b"}},
		{"d", 10, []string{"", "a", "b", "c", "d"}},
		{"zz", 10, []string{"", "a", "b", "c", "d"}},
		{"b", 2, []string{"", "c"}},
		{"b", 3, []string{"", "c", "d"}},
		{"c", 4, []string{"", "d", "a", "b"}},
		{"zz", 2, []string{"", "a"}},
		{"a", 1, []string{""}},
	} {
		if got := availableKeys(t, ex, "q", c.after, c.limit); !slices.Equal(got, c.want) {
			t.Errorf("after %q limit %d: got %q want %q", c.after, c.limit, got, c.want)
		}
	}
	if got := availableKeys(t, ex, "q", "", 0); len(got) != 0 {
		t.Errorf("limit 0: %q", got)
	}
	// No jobs without a key: no "".
	if got := availableKeys(t, ex, "other", "a", 10); !slices.Equal(got, []string{"x", "a"}) {
		t.Errorf("other queue: %q", got)
	}
	if got := availableKeys(t, ex, "q2", "", 10); len(got) != 0 {
		t.Errorf("only running: %q", got)
	}
	if got := availableKeys(t, ex, "nothing", "", 10); len(got) != 0 {
		t.Errorf("empty queue: %q", got)
	}
	// A transaction's executor runs the same statement.
	tx, err := ex.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if got := availableKeys(t, tx, "q", "c", 2); !slices.Equal(got, []string{"", "d"}) {
		t.Errorf("in a transaction: %q", got)
	}
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Once the keyless jobs are claimed, the list starts with keys.
	claimKeys(t, ex, "q", []string{""}, []int{5})
	if got := availableKeys(t, ex, "q", "c", 10); !slices.Equal(got, []string{"d", "a", "b", "c"}) {
		t.Errorf("after claiming keyless jobs: %q", got)
	}
}

// setKeyState locks key (creating its row), lets change edit it and saves,
// in one transaction.
func setKeyState(t *testing.T, ex keeldriver.Executor, key string, change func(*keeltype.FlowKeyRow)) {
	t.Helper()
	ctx := context.Background()
	tx, err := ex.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{Keys: []string{key}})
	if err != nil || len(rows) != 1 {
		t.Fatalf("lock %q: %v %v", key, rows, err)
	}
	change(rows[0])
	if err := tx.FlowKeysSave(ctx, rows, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// testJobClaimKeys: per key in input order, (priority, id) within a key,
// claimed like JobClaim; paused keys and open breakers give nothing,
// half-open and failing-but-closed keys do; a paused queue gives nothing; a
// repeated key adds up; bad params are refused.
func testJobClaimKeys(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	byKey := map[string][]int64{}
	for _, k := range []string{"a", "b", "", "paused", "open", "half"} {
		for i := range 4 {
			byKey[k] = append(byKey[k], insert(t, ex, keyed("default", k, 4-i%2))[0].ID) // priorities 4, 3, 4, 3
		}
	}
	setKeyState(t, ex, "paused", func(r *keeltype.FlowKeyRow) { r.PausedAt = ptr(time.Now()) })
	setKeyState(t, ex, "open", func(r *keeltype.FlowKeyRow) { r.BreakerState = keeltype.BreakerOpen })
	setKeyState(t, ex, "half", func(r *keeltype.FlowKeyRow) { r.BreakerState = keeltype.BreakerHalfOpen })
	setKeyState(t, ex, "b", func(r *keeltype.FlowKeyRow) { r.ConsecutiveFailures = 3 }) // not gated

	now := time.Now().UTC().Truncate(time.Microsecond)
	jobs, err := ex.JobClaimKeys(ctx, &keeldriver.JobClaimKeysParams{
		Queue: "default", Owner: "w1", LeaseDuration: time.Minute, Now: &now,
		Keys: []string{"b", "", "a", "paused", "open", "half", "none"},
		Ns:   []int{10, 1, 2, 3, 3, 1, 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{
		byKey["b"][1], byKey["b"][3], byKey["b"][0], byKey["b"][2],
		byKey[""][1],
		byKey["a"][1], byKey["a"][3],
		byKey["half"][1],
	}
	if got := ids(jobs); !slices.Equal(got, want) {
		t.Fatalf("claimed %v (keys %q), want %v", got, keysOf(jobs), want)
	}
	for _, j := range jobs {
		if j.State != keeltype.JobStateRunning || j.Fence != 1 || j.Attempt != 1 || j.LeaseOwner != "w1" ||
			j.LeaseExpiresAt == nil || !j.LeaseExpiresAt.Equal(now.Add(time.Minute)) ||
			j.AttemptedAt == nil || !j.AttemptedAt.Equal(now) || j.Queue != "default" {
			t.Errorf("claimed job %+v", j)
		}
	}

	// A paused queue gives nothing, even for open keys.
	if _, err := ex.QueuePause(ctx, &keeldriver.QueuePauseParams{Name: "default"}); err != nil {
		t.Fatal(err)
	}
	if got := claimKeys(t, ex, "default", []string{"a", ""}, []int{5, 5}); len(got) != 0 {
		t.Fatalf("paused queue: %v", ids(got))
	}
	if _, err := ex.QueueResume(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	// A repeated key adds up; n = 0 takes nothing.
	if got := claimKeys(t, ex, "default", []string{"a", "a", ""}, []int{1, 1, 0}); !slices.Equal(ids(got), []int64{byKey["a"][0], byKey["a"][2]}) {
		t.Fatalf("repeated key: %v", ids(got))
	}
	if got := claimKeys(t, ex, "default", []string{"a", "b"}, []int{0, 0}); len(got) != 0 {
		t.Fatalf("zero counts: %v", ids(got))
	}

	for _, p := range []*keeldriver.JobClaimKeysParams{
		{Queue: "default", Owner: "w", LeaseDuration: time.Minute, Keys: []string{"a"}, Ns: []int{1, 2}},
		{Queue: "default", Owner: "w", LeaseDuration: time.Minute, Keys: []string{"a"}},
		{Queue: "default", Owner: "w", Keys: []string{"a"}, Ns: []int{1}},
	} {
		if _, err := ex.JobClaimKeys(ctx, p); !errors.Is(err, keeltype.ErrInvalidArgument) {
			t.Errorf("%+v: err %v, want ErrInvalidArgument", p, err)
		}
	}
}

// testJobClaimKeysGates: the key gates live in the statement, keys are per
// queue, and a resumed key claims again.
func testJobClaimKeysGates(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	a := insert(t, ex, keyed("q", "a", 3), keyed("q", "a", 1), keyed("q", "a", 2), keyed("q", "a", 1), keyed("q", "a", 4))
	b := insert(t, ex, keyed("q", "b", 2), keyed("q", "b", 2))
	none := insert(t, ex, keyed("q", "", 2), keyed("q", "", 1), keyed("q", "", 2))
	insert(t, ex, keyed("q", "paused", 1), keyed("q", "open", 1), keyed("q", "half", 1))
	insert(t, ex, keyed("other", "a", 1))

	gates, err := ex.FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{Keys: []string{"paused", "open", "half"}, Now: at(0)})
	if err != nil || !slices.Equal(flowKeyNames(gates), []string{"half", "open", "paused"}) {
		t.Fatalf("lock: %q %v", flowKeyNames(gates), err)
	}
	gates[0].BreakerState = keeltype.BreakerHalfOpen
	gates[1].BreakerState = keeltype.BreakerOpen
	gates[2].PausedAt = at(0)
	if err := ex.FlowKeysSave(ctx, gates, at(time.Second)); err != nil {
		t.Fatal(err)
	}
	if g, err := ex.FlowKeyGet(ctx, "paused"); err != nil || g.PausedAt == nil {
		t.Fatalf("paused key not saved as paused: %+v %v", g, err)
	}

	got := claimKeys(t, ex, "q", []string{"b", "a", "", "paused", "open", "half", "missing"}, []int{5, 3, 2, 3, 3, 1, 2})
	want := append(ids(b), a[1].ID, a[3].ID, a[2].ID, none[1].ID, none[0].ID)
	if !slices.Equal(ids(got)[:min(len(got), len(want))], want) || len(got) != len(want)+1 || got[len(got)-1].FlowKey != "half" {
		t.Fatalf("claimed %v (keys %q), want %v then the half-open key", ids(got), keysOf(got), want)
	}
	for _, j := range got {
		if j.State != keeltype.JobStateRunning || j.Attempt != 1 || j.Fence != 1 || j.LeaseOwner != "w1" ||
			j.LeaseExpiresAt == nil || !j.LeaseExpiresAt.Equal(t0.Add(time.Minute)) ||
			j.AttemptedAt == nil || !j.AttemptedAt.Equal(t0) || j.Queue != "q" {
			t.Fatalf("claimed row %+v", j)
		}
	}
	// A repeated key is claimed once with the counts added.
	if got := claimKeys(t, ex, "q", []string{"a", "b", "a"}, []int{1, 0, 1}); !slices.Equal(ids(got), []int64{a[0].ID, a[4].ID}) {
		t.Fatalf("repeated key: %v", ids(got))
	}
	// The other queue's job of key "a" is its own.
	if got := claimKeys(t, ex, "other", []string{"a"}, []int{5}); len(got) != 1 || got[0].Queue != "other" {
		t.Fatalf("other queue: %+v", got)
	}
	// Resuming the paused key makes it claimable.
	st, err := ex.FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{Keys: []string{"paused"}})
	if err != nil || len(st) != 1 {
		t.Fatalf("lock: %v %v", st, err)
	}
	st[0].PausedAt = nil
	if err := ex.FlowKeysSave(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	if got := claimKeys(t, ex, "q", []string{"paused", "open"}, []int{1, 1}); len(got) != 1 || got[0].FlowKey != "paused" {
		t.Fatalf("resumed key: %+v", got)
	}
}

// testJobClaimKeysPausedQueueAndTx: a paused queue gives nothing; inside a
// transaction the claim goes with a rollback.
func testJobClaimKeysPausedQueueAndTx(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	jobs := insert(t, ex, keyed("q", "a", 2), keyed("q", "", 2))
	if _, err := ex.QueuePause(ctx, &keeldriver.QueuePauseParams{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	if got := claimKeys(t, ex, "q", []string{"a", ""}, []int{1, 1}); len(got) != 0 {
		t.Fatalf("paused queue: %v", ids(got))
	}
	if _, err := ex.QueueResume(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	tx, err := ex.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := claimKeys(t, tx, "q", []string{"a", ""}, []int{1, 1}); len(got) != 2 {
		t.Fatalf("in a transaction: %v", ids(got))
	}
	if j, err := tx.JobGet(ctx, jobs[0].ID); err != nil || j.State != keeltype.JobStateRunning {
		t.Fatalf("in a transaction: %+v %v", j, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if got := get(t, ex, j.ID); got.State != keeltype.JobStateAvailable || got.Fence != 0 {
			t.Fatalf("after rollback: %+v", got)
		}
	}
}

// testJobClaimKeysConcurrent: claimers racing over the same keys never
// share a job and together take all of them.
func testJobClaimKeysConcurrent(t *testing.T, e *env) {
	keys := []string{"", "a", "b", "c"}
	const perKey = 60
	var params []*keeldriver.JobInsertParams
	for i := range perKey {
		for _, k := range keys {
			params = append(params, keyed("default", k, 1+i%4))
		}
	}
	insert(t, e.ex, params...)
	claimAllConcurrently(t, len(params), func(owner string) ([]*keeltype.JobRow, error) {
		return e.ex.JobClaimKeys(context.Background(), &keeldriver.JobClaimKeysParams{
			Queue: "default", Owner: owner, LeaseDuration: time.Minute, Keys: keys, Ns: []int{2, 3, 1, 2},
		})
	})
}
