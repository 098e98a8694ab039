package keeldrivertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// t0 is the suite's fixed clock, in the past: inserts without RunAt use the
// database clock, so a job due before t0 is claimable at any time.
var t0 = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)

// at is t0 + d.
func at(d time.Duration) *time.Time {
	v := t0.Add(d)
	return &v
}

func ptr[T any](v T) *T { return &v }

// job is an available job of kind "k" in queue q, due an hour before t0.
func job(q string) *keeldriver.JobInsertParams {
	return &keeldriver.JobInsertParams{Kind: "k", Queue: q, RunAt: at(-time.Hour)}
}

// keyed is job(q) with flow key k ("" = none) and priority p.
func keyed(q, k string, p int) *keeldriver.JobInsertParams {
	j := job(q)
	j.FlowKey, j.Priority = k, p
	return j
}

func insertResults(t *testing.T, ex keeldriver.Executor, params ...*keeldriver.JobInsertParams) []keeldriver.JobInsertResult {
	t.Helper()
	res, err := ex.JobInsertMany(context.Background(), params)
	if err != nil {
		t.Fatalf("inserting %d jobs: %v", len(params), err)
	}
	if len(res) != len(params) {
		t.Fatalf("inserting %d jobs: %d results", len(params), len(res))
	}
	return res
}

func insert(t *testing.T, ex keeldriver.Executor, params ...*keeldriver.JobInsertParams) []*keeltype.JobRow {
	t.Helper()
	res := insertResults(t, ex, params...)
	out := make([]*keeltype.JobRow, len(res))
	for i, r := range res {
		out[i] = r.Job
	}
	return out
}

// claim claims up to n jobs with a one-minute lease at now (nil = the
// database clock).
func claim(t *testing.T, ex keeldriver.Executor, queue, owner string, n int, now *time.Time) []*keeltype.JobRow {
	t.Helper()
	jobs, err := ex.JobClaim(context.Background(), &keeldriver.JobClaimParams{
		Queue: queue, Owner: owner, Max: n, LeaseDuration: time.Minute, Now: now,
	})
	if err != nil {
		t.Fatalf("claiming from %s: %v", queue, err)
	}
	return jobs
}

func get(t *testing.T, ex keeldriver.Executor, id int64) *keeltype.JobRow {
	t.Helper()
	j, err := ex.JobGet(context.Background(), id)
	if err != nil {
		t.Fatalf("getting job %d: %v", id, err)
	}
	return j
}

func finish(t *testing.T, ex keeldriver.Executor, params ...*keeldriver.JobFinishParams) []keeldriver.JobFinishResult {
	t.Helper()
	res, err := ex.JobFinishMany(context.Background(), params)
	if err != nil {
		t.Fatalf("finishing %d jobs: %v", len(params), err)
	}
	if len(res) != len(params) {
		t.Fatalf("finishing %d jobs: %d results", len(params), len(res))
	}
	return res
}

// done is the params that complete j under its current fence.
func done(j *keeltype.JobRow, state keeltype.JobState, now *time.Time) *keeldriver.JobFinishParams {
	return &keeldriver.JobFinishParams{ID: j.ID, Fence: j.Fence, State: state, Now: now}
}

func ids(jobs []*keeltype.JobRow) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func sorted(v []int64) []int64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v
}

// near reports whether tm is within a minute of the test process's clock:
// the database clock of a local test server.
func near(tm time.Time) bool {
	return time.Since(tm).Abs() < time.Minute
}

// canonical re-encodes a JSON document with sorted keys and no spaces, so
// that drivers storing JSON differently (jsonb normalizes, text keeps the
// bytes) compare equal when they hold the same value. Not JSON stays as is.
func canonical(raw []byte) json.RawMessage {
	if raw == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}

func sameJSON(a, b []byte) bool { return bytes.Equal(canonical(a), canonical(b)) }

// claimAllConcurrently runs 8 claimers with claimFn until the queue is dry
// and fails on any job claimed twice or any job left; want is how many
// jobs there are.
func claimAllConcurrently(t *testing.T, want int, claimFn func(owner string) ([]*keeltype.JobRow, error)) {
	t.Helper()
	var mu sync.Mutex
	seen := map[int64]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		owner := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			for {
				jobs, err := claimFn(owner)
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
						mu.Unlock()
						errs <- fmt.Errorf("job %d claimed by %s and %s", j.ID, prev, owner)
						return
					}
					seen[j.ID] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	if err := errors.Join(all...); err != nil {
		t.Fatal(err)
	}
	if len(seen) != want {
		t.Fatalf("claimed %d distinct jobs, want %d", len(seen), want)
	}
}
