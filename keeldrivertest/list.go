package keeldrivertest

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// testJobList: filters and both cursor directions.
func testJobList(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	var params []*keeldriver.JobInsertParams
	for i := range 10 {
		p := keyed([]string{"q0", "q1", "q2"}[i%3], "f", 2)
		p.Kind = []string{"k0", "k1"}[i%2]
		p.BatchID = int64(i % 2)
		p.Subject = string(rune('a' + i))
		params = append(params, p)
	}
	jobs := insert(t, ex, params...)
	list := func(p keeldriver.JobListParams) []int64 {
		t.Helper()
		rows, err := ex.JobList(ctx, &p)
		if err != nil {
			t.Fatalf("list %+v: %v", p, err)
		}
		return ids(rows)
	}
	want := func(is ...int) []int64 {
		out := make([]int64, len(is))
		for k, i := range is {
			out[k] = jobs[i].ID
		}
		return out
	}
	for _, c := range []struct {
		name string
		got  []int64
		want []int64
	}{
		{"first page", list(keeldriver.JobListParams{Limit: 4}), want(0, 1, 2, 3)},
		{"second page", list(keeldriver.JobListParams{Limit: 4, AfterID: jobs[3].ID}), want(4, 5, 6, 7)},
		{"desc page", list(keeldriver.JobListParams{Desc: true, Limit: 3}), want(9, 8, 7)},
		{"desc second page", list(keeldriver.JobListParams{Desc: true, BeforeID: jobs[7].ID}), want(6, 5, 4, 3, 2, 1, 0)},
		{"filters", list(keeldriver.JobListParams{Kinds: []string{"k1"}, Queues: []string{"q0", "q1"}, BatchID: 1, FlowKey: "f"}), want(1, 3, 7, 9)},
		{"kind page", list(keeldriver.JobListParams{Kinds: []string{"k0"}, AfterID: jobs[2].ID, Limit: 2}), want(4, 6)},
		{"desc queue before", list(keeldriver.JobListParams{Desc: true, BeforeID: jobs[2].ID, Queues: []string{"q2"}}), nil},
		{"flow key", list(keeldriver.JobListParams{FlowKey: "none"}), nil},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: got %v want %v", c.name, c.got, c.want)
		}
	}
	claim(t, ex, "q0", "w", 1, nil)
	if got := list(keeldriver.JobListParams{States: []keeltype.JobState{keeltype.JobStateRunning}}); !slices.Equal(got, want(0)) {
		t.Errorf("state filter: %v", got)
	}
	got := list(keeldriver.JobListParams{Desc: true, States: []keeltype.JobState{keeltype.JobStateAvailable, keeltype.JobStateRunning}, Queues: []string{"q0"}})
	if !slices.Equal(got, want(9, 6, 3, 0)) {
		t.Errorf("states and queue, desc: %v", got)
	}
	// A key's page merges its running jobs with the others in id order
	// (PostgreSQL keeps the two in different indexes).
	claim(t, ex, "q1", "w", 1, nil)
	for _, c := range []struct {
		name string
		got  []int64
		want []int64
	}{
		{"key, running among the rest", list(keeldriver.JobListParams{FlowKey: "f", Limit: 3}), want(0, 1, 2)},
		{"key, after a running job", list(keeldriver.JobListParams{FlowKey: "f", AfterID: jobs[0].ID, Limit: 2}), want(1, 2)},
		{"key, desc before", list(keeldriver.JobListParams{FlowKey: "f", Desc: true, BeforeID: jobs[3].ID}), want(2, 1, 0)},
		{"key, desc page", list(keeldriver.JobListParams{FlowKey: "f", Desc: true, Limit: 2}), want(9, 8)},
		{"key, running only", list(keeldriver.JobListParams{FlowKey: "f", States: []keeltype.JobState{keeltype.JobStateRunning}}), want(0, 1)},
		{"key, running and queue", list(keeldriver.JobListParams{FlowKey: "f", Queues: []string{"q1"}, Desc: true}), want(7, 4, 1)},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: got %v want %v", c.name, c.got, c.want)
		}
	}
}

// testPrune: final jobs finalized before Before are deleted, Max at a time;
// live and manual jobs stay.
func testPrune(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	jobs := insert(t, ex, job("q"), job("q"), job("q"), job("q"), job("q"), job("q"))
	c := claim(t, ex, "q", "w", 5, at(0))
	finish(t, ex,
		done(c[0], keeltype.JobStateCompleted, at(0)),
		done(c[1], keeltype.JobStateSkipped, at(time.Hour)),
		done(c[2], keeltype.JobStateCompleted, at(2*time.Hour)),
		done(c[4], keeltype.JobStateManual, at(0)),
	)
	if _, err := ex.JobCancel(ctx, &keeldriver.JobCancelParams{ID: jobs[5].ID, Now: at(30 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	prune := func(before time.Time, max int) int {
		t.Helper()
		n, err := ex.JobPrune(ctx, &keeldriver.JobPruneParams{Before: before, Max: max})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := prune(t0.Add(-time.Hour), 10); n != 0 {
		t.Fatalf("prune before everything: %d", n)
	}
	if n := prune(t0.Add(90*time.Minute), 1); n != 1 {
		t.Fatalf("prune max 1: %d", n)
	}
	if n := prune(t0.Add(90*time.Minute), 10); n != 2 {
		t.Fatalf("prune rest: %d", n)
	}
	left, err := ex.JobList(ctx, &keeldriver.JobListParams{})
	if err != nil || !slices.Equal(ids(left), []int64{c[2].ID, c[3].ID, c[4].ID}) {
		t.Fatalf("left %v (%v), want %v", ids(left), err, []int64{c[2].ID, c[3].ID, c[4].ID})
	}
	if n := prune(time.Now().Add(time.Hour), 0); n != 1 {
		t.Fatalf("prune with the default max: %d", n)
	}
}

// testFinalizedCounts: jobs finalized in (Since, Until] by state, plus
// manual jobs by their last attempt; states with no jobs are absent.
func testFinalizedCounts(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	jobs := insert(t, ex, job("q"), job("q"), job("q"), job("q"), job("q"), job("q"), job("late"), job("idle"))
	c := claim(t, ex, "q", "w", 6, at(0))
	finish(t, ex,
		done(c[0], keeltype.JobStateCompleted, at(time.Minute)),
		done(c[1], keeltype.JobStateCompleted, at(2*time.Minute)),
		done(c[2], keeltype.JobStateFailed, at(3*time.Minute)),
		done(c[3], keeltype.JobStateSkipped, at(10*time.Minute)),
		done(c[4], keeltype.JobStateManual, at(time.Minute)), // attempted at t0
		done(c[5], keeltype.JobStateRetryable, at(time.Minute)),
	)
	late := claim(t, ex, "late", "w", 1, at(5*time.Minute))[0]
	finish(t, ex, done(late, keeltype.JobStateManual, at(6*time.Minute)))
	if _, err := ex.JobCancel(ctx, &keeldriver.JobCancelParams{ID: jobs[7].ID, Now: at(4 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	count := func(since, until time.Duration) map[keeltype.JobState]int64 {
		t.Helper()
		got, err := ex.JobFinalizedCounts(ctx, &keeldriver.JobFinalizedCountsParams{Since: t0.Add(since), Until: t0.Add(until)})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, c := range []struct {
		since, until time.Duration
		want         map[keeltype.JobState]int64
	}{
		{0, 5 * time.Minute, map[keeltype.JobState]int64{
			keeltype.JobStateCompleted: 2, keeltype.JobStateFailed: 1, keeltype.JobStateCancelled: 1, keeltype.JobStateManual: 1}},
		{time.Minute, 10 * time.Minute, map[keeltype.JobState]int64{
			keeltype.JobStateCompleted: 1, keeltype.JobStateFailed: 1, keeltype.JobStateCancelled: 1,
			keeltype.JobStateSkipped: 1, keeltype.JobStateManual: 1}},
		{-time.Minute, 0, map[keeltype.JobState]int64{keeltype.JobStateManual: 1}},
		{time.Hour, 2 * time.Hour, map[keeltype.JobState]int64{}},
	} {
		if got := count(c.since, c.until); !maps.Equal(got, c.want) {
			t.Errorf("(%v, %v]: got %v want %v", c.since, c.until, got, c.want)
		}
	}
}
