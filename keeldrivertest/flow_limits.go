package keeldrivertest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// testFlowLimits: every field round-trips, upsert replaces by (pattern,
// queue) with defaults, the list is in (pattern, queue) order, delete is
// exact, bad limits are refused. The ramp is stored as JSON of
// milliseconds.
func testFlowLimits(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	if list, err := ex.FlowLimitList(ctx); err != nil || len(list) != 0 {
		t.Fatalf("empty list: %v %v", list, err)
	}
	full := &keeltype.FlowLimit{
		Pattern: "app:*", Queue: "q", Rate: 2.5, Burst: 3, MaxRunning: 4,
		BreakerFailures: 5, BreakerRatio: 0.5, BreakerWindow: 90 * time.Second, BreakerMinCalls: 20,
		BreakerCooldown: 1500 * time.Millisecond, BreakerProbes: 2, AutoPauseFailures: 50, Weight: 7,
		Ramp:      []keeltype.RampStep{{After: 0, Rate: 0.5}, {After: 30 * time.Second, Rate: 1}, {After: 2 * time.Minute, Rate: 2.5}},
		UpdatedAt: t0, UpdatedBy: "ops",
	}
	got, err := ex.FlowLimitUpsert(ctx, full)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, full) {
		t.Fatalf("stored:\n got %+v\nwant %+v", got, full)
	}
	var ramp string
	if err := e.queryRow(ctx, "SELECT ramp FROM keel_flow_limit WHERE pattern = 'app:*' AND queue = 'q'", &ramp); err != nil ||
		!sameJSON([]byte(ramp), []byte(`[{"after":0,"rate":0.5},{"after":30000,"rate":1},{"after":120000,"rate":2.5}]`)) {
		t.Fatalf("ramp column %s (%v)", ramp, err)
	}

	// Upsert replaces every field. Defaults: Weight 1, UpdatedAt from the
	// database clock, no ramp; durations at millisecond precision.
	got, err = ex.FlowLimitUpsert(ctx, &keeltype.FlowLimit{Pattern: "app:*", Queue: "q", MaxRunning: 1, BreakerWindow: 1500 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	if got.Weight != 1 || got.Rate != 0 || got.Burst != 0 || got.MaxRunning != 1 || got.Ramp != nil || got.UpdatedBy != "" ||
		got.BreakerWindow != time.Millisecond || !near(got.UpdatedAt) {
		t.Fatalf("replaced: %+v", got)
	}
	for _, l := range []*keeltype.FlowLimit{{Pattern: "*"}, {Pattern: "app:*"}, {Pattern: "a", Queue: "z"}, {Pattern: "app:1", Queue: "x"}} {
		if _, err := ex.FlowLimitUpsert(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	limitNames := func() []string {
		t.Helper()
		list, err := ex.FlowLimitList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range list {
			out = append(out, l.Pattern+"|"+l.Queue)
		}
		return out
	}
	if got := limitNames(); !slices.Equal(got, []string{"*|", "a|z", "app:*|", "app:*|q", "app:1|x"}) {
		t.Fatalf("list: %q", got)
	}

	if err := ex.FlowLimitDelete(ctx, "app:*", "q"); err != nil {
		t.Fatal(err)
	}
	if err := ex.FlowLimitDelete(ctx, "app:*", "q"); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if got := limitNames(); !slices.Equal(got, []string{"*|", "a|z", "app:*|", "app:1|x"}) {
		t.Fatalf("after delete: %q", got)
	}
	for _, bad := range []*keeltype.FlowLimit{
		nil, {}, {Pattern: "x", BreakerRatio: 2}, {Pattern: "x", Rate: -1}, {Pattern: "x", Weight: 1001}, {Pattern: "x", Weight: 5000},
	} {
		if _, err := ex.FlowLimitUpsert(ctx, bad); !errors.Is(err, keeltype.ErrInvalidArgument) {
			t.Errorf("upsert %+v: %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// priorities reads (priority, base_priority) of each job; -1 = NULL.
func priorities(t *testing.T, e *env, jobs ...*keeltype.JobRow) (p, base []int64) {
	t.Helper()
	for _, j := range jobs {
		var prio, b int64
		q := fmt.Sprintf("SELECT priority, coalesce(base_priority, -1) FROM keel_job WHERE id = %d", j.ID)
		if err := e.queryRow(context.Background(), q, &prio, &b); err != nil {
			t.Fatalf("reading priorities of job %d: %v", j.ID, err)
		}
		p, base = append(p, prio), append(base, b)
	}
	return p, base
}

func ageJobs(t *testing.T, ex keeldriver.Executor, interval time.Duration, now time.Time, max int) int {
	t.Helper()
	n, err := ex.JobAgePriorities(context.Background(), &keeldriver.JobAgeParams{Interval: interval, Max: max, Now: &now})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// testJobAgePriorities: available jobs waiting longer than Interval ×
// (levels raised + 1) go up one level per call, at most Max per call,
// never past the top, remembering the original priority; other states
// never age; aged jobs claim like any other.
func testJobAgePriorities(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	mk := func(p int, age time.Duration) *keeldriver.JobInsertParams {
		return &keeldriver.JobInsertParams{Kind: "k", Queue: "q", Priority: p, RunAt: at(-age)}
	}
	jobs := insert(t, ex,
		mk(3, 90*time.Second), // old enough for one level now
		mk(1, time.Hour),      // already highest
		mk(4, 30*time.Second), // too young
		mk(4, 10*time.Minute), // old enough for one level per call, up to 3 levels
	)
	running := insert(t, ex, &keeldriver.JobInsertParams{Kind: "k", Queue: "q", Priority: 4, FlowKey: "r", RunAt: at(-time.Hour)})
	claimKeys(t, ex, "q", []string{"r"}, []int{1})
	all := append(slices.Clone(jobs), running...)
	check := func(name string, wantP, wantB []int64) {
		t.Helper()
		if p, b := priorities(t, e, all...); !slices.Equal(p, wantP) || !slices.Equal(b, wantB) {
			t.Fatalf("%s: priorities %v base %v, want %v %v", name, p, b, wantP, wantB)
		}
	}
	if n := ageJobs(t, ex, time.Minute, t0, 1); n != 1 {
		t.Fatalf("max 1: %d", n)
	}
	if n := ageJobs(t, ex, time.Minute, t0, 0); n != 1 {
		t.Fatalf("rest: %d", n)
	}
	check("first round", []int64{2, 1, 4, 3, 4}, []int64{3, -1, -1, 4, -1})
	// Same instant: a raised job needs twice the interval for the next
	// level. The 10-minute job qualifies (≥ 2 min), the 90 s one does not.
	for i, want := range []int{1, 1, 0} {
		if n := ageJobs(t, ex, time.Minute, t0, 0); n != want {
			t.Fatalf("call %d at the same instant: %d, want %d", i+2, n, want)
		}
	}
	check("after rounds", []int64{2, 1, 4, 1, 4}, []int64{3, -1, -1, 4, -1})
	// 90 s later the first job (3 min waiting) gets its second level and
	// the 30 s one (2 min) its first.
	if n := ageJobs(t, ex, time.Minute, t0.Add(90*time.Second), 0); n != 2 {
		t.Fatalf("later: %d", n)
	}
	check("later", []int64{1, 1, 3, 1, 4}, []int64{3, -1, 4, 4, -1})
	// Aged jobs claim and read like any other, highest first.
	got := claim(t, ex, "q", "w", 5, nil)
	if !slices.Equal(ids(got), []int64{jobs[0].ID, jobs[1].ID, jobs[3].ID, jobs[2].ID}) || got[0].Priority != 1 {
		t.Fatalf("claim order %v", ids(got))
	}
	if _, err := ex.JobAgePriorities(ctx, &keeldriver.JobAgeParams{}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("no interval: %v", err)
	}
}

// testJobAgePrioritiesLevels: one level per interval waited, counted from
// the job's run_at; cancelled jobs do not age.
func testJobAgePrioritiesLevels(t *testing.T, e *env) {
	ex := e.ex
	start := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	mk := func(priority int) *keeldriver.JobInsertParams {
		return &keeldriver.JobInsertParams{Kind: "k", Queue: "default", Priority: priority, RunAt: &start}
	}
	jobs := insert(t, ex, mk(4), mk(3), mk(1), mk(4))
	j4, j3, j1, cancelled := jobs[0], jobs[1], jobs[2], jobs[3]
	if _, err := ex.JobCancel(context.Background(), &keeldriver.JobCancelParams{ID: cancelled.ID}); err != nil {
		t.Fatal(err)
	}
	const interval = 10 * time.Second
	check := func(name string, wantP, wantB []int64) {
		t.Helper()
		if p, b := priorities(t, e, j4, j3, j1, cancelled); !slices.Equal(p, wantP) || !slices.Equal(b, wantB) {
			t.Fatalf("%s: priorities %v base %v, want %v %v", name, p, b, wantP, wantB)
		}
	}
	if n := ageJobs(t, ex, interval, start.Add(interval/2), 0); n != 0 {
		t.Fatalf("before one interval: aged %d", n)
	}
	if n := ageJobs(t, ex, interval, start.Add(interval+interval/2), 0); n != 2 {
		t.Fatalf("after one interval: aged %d, want 2", n)
	}
	check("one interval", []int64{3, 2, 1, 4}, []int64{4, 3, -1, -1})
	if n := ageJobs(t, ex, interval, start.Add(interval+interval/2), 0); n != 0 {
		t.Fatalf("same time: aged %d", n)
	}
	if n := ageJobs(t, ex, interval, start.Add(2*interval+interval/2), 1); n != 1 {
		t.Fatalf("max 1: aged %d", n)
	}
	if n := ageJobs(t, ex, interval, start.Add(2*interval+interval/2), 0); n != 1 {
		t.Fatalf("rest: aged %d", n)
	}
	check("two intervals", []int64{2, 1, 1, 4}, []int64{4, 3, -1, -1})
	if n := ageJobs(t, ex, interval, start.Add(time.Hour), 0); n != 1 { // j3 is at the top already
		t.Fatalf("later: aged %d", n)
	}
	check("an hour", []int64{1, 1, 1, 4}, []int64{4, 3, -1, -1})
	jobsClaimed := claim(t, ex, "default", "w", 10, nil)
	if len(jobsClaimed) != 3 || jobsClaimed[0].ID != j4.ID || jobsClaimed[0].Priority != 1 {
		t.Fatalf("claimed %+v", jobsClaimed)
	}
}
