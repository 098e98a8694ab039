package keelpgx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// flow gives the flow statements of an executor (keeldriver.Executor may
// not embed FlowExecutor yet).
func flow(t *testing.T, ex any) keeldriver.FlowExecutor {
	t.Helper()
	fx, ok := ex.(keeldriver.FlowExecutor)
	if !ok {
		t.Fatalf("%T does not implement keeldriver.FlowExecutor", ex)
	}
	return fx
}

func keyed(key string, priority int) *keeldriver.JobInsertParams {
	p := job("flow")
	p.FlowKey = key
	p.Priority = priority
	return p
}

func availableKeys(t *testing.T, fx keeldriver.FlowExecutor, queue, after string, limit int) []string {
	t.Helper()
	keys, err := fx.FlowKeysAvailable(context.Background(), &keeldriver.FlowKeysAvailableParams{Queue: queue, After: after, Limit: limit})
	if err != nil {
		t.Fatalf("FlowKeysAvailable(%q, %d): %v", after, limit, err)
	}
	return keys
}

func TestFlowKeysAvailable(t *testing.T) {
	d := newTestDriver(t)
	ex := d.Executor()
	fx := flow(t, ex)
	future := time.Now().Add(time.Hour)
	scheduled := keyed("e", 2)
	scheduled.RunAt = &future
	other := keyed("d", 2)
	other.Queue = "other"
	insert(t, ex, keyed("b", 2), keyed("a", 1), keyed("c", 4), keyed("b", 1), keyed("", 2), keyed("a", 3),
		scheduled, other)
	// A running job does not make its key available.
	insert(t, ex, keyed("f", 1))
	if got, err := fx.JobClaimKeys(context.Background(), &keeldriver.JobClaimKeysParams{Queue: "default", Owner: "w",
		LeaseDuration: time.Minute, Keys: []string{"f"}, Ns: []int{5}}); err != nil || len(got) != 1 {
		t.Fatalf("claimed %d: %v", len(got), err)
	}

	for _, tc := range []struct {
		after string
		limit int
		want  []string
	}{
		{"", 10, []string{"", "a", "b", "c"}},
		{"a", 10, []string{"", "b", "c", "a"}},
		{"b", 10, []string{"", "c", "a", "b"}},
		{"bb", 10, []string{"", "c", "a", "b"}},
		{"c", 10, []string{"", "a", "b", "c"}},
		{"z", 10, []string{"", "a", "b", "c"}},
		{"b", 2, []string{"", "c"}},
		{"b", 3, []string{"", "c", "a"}},
		{"a", 1, []string{""}},
	} {
		if got := availableKeys(t, fx, "default", tc.after, tc.limit); !slices.Equal(got, tc.want) {
			t.Errorf("after %q limit %d: got %q, want %q", tc.after, tc.limit, got, tc.want)
		}
	}
	if got := availableKeys(t, fx, "default", "", 0); len(got) != 0 {
		t.Errorf("limit 0: %q", got)
	}
	// No jobs without a key in "other": no "".
	if got := availableKeys(t, fx, "other", "d", 5); !slices.Equal(got, []string{"d"}) {
		t.Errorf("other queue: %q", got)
	}
	if got := availableKeys(t, fx, "nothing", "", 5); len(got) != 0 {
		t.Errorf("empty queue: %q", got)
	}
	// The transaction executor runs the same statement.
	tx, err := ex.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if got := availableKeys(t, flow(t, tx), "default", "c", 2); !slices.Equal(got, []string{"", "a"}) {
		t.Errorf("in tx: %q", got)
	}
}

// explainJSON runs EXPLAIN (FORMAT JSON, opts) of query with args and
// returns the top plan node.
func explainJSON(t *testing.T, d *Driver, opts, query string, args ...any) map[string]any {
	t.Helper()
	var raw []byte
	if err := d.pool.QueryRow(context.Background(), "EXPLAIN (FORMAT JSON"+opts+") "+query, args...).Scan(&raw); err != nil {
		t.Fatalf("explain: %v", err)
	}
	var out []struct {
		Plan map[string]any `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		t.Fatalf("explain output: %v %s", err, raw)
	}
	return out[0].Plan
}

// planNodes flattens a plan tree.
func planNodes(n map[string]any) []map[string]any {
	out := []map[string]any{n}
	kids, _ := n["Plans"].([]any)
	for _, k := range kids {
		out = append(out, planNodes(k.(map[string]any))...)
	}
	return out
}

// TestFlowPlansOnLargeBacklog checks on ~200k available jobs over 3 keys
// that listing keys is a skip scan (a few index pages, not the backlog) and
// that each claim lateral is an ordered probe of the claim index.
func TestFlowPlansOnLargeBacklog(t *testing.T) {
	if testing.Short() {
		t.Skip("large backlog")
	}
	d := newTestDriver(t)
	ctx := context.Background()
	ex := d.Executor()
	err := ex.Exec(ctx, `
		INSERT INTO keel_job (kind, queue, flow_key, priority)
		SELECT 'big', 'default', (ARRAY['k1', 'k2', 'k3'])[1 + g % 3], 1 + g % 4 FROM generate_series(1, 200000) g;
		INSERT INTO keel_job (kind, queue, priority) SELECT 'big', 'default', 1 + g % 4 FROM generate_series(1, 5000) g;
		INSERT INTO keel_job (kind, queue, flow_key, state, finalized_at)
		SELECT 'big', 'default', 'done' || g, 'completed', now() FROM generate_series(1, 20000) g;
		ANALYZE keel_job`)
	if err != nil {
		t.Fatal(err)
	}

	plan := explainJSON(t, d, ", ANALYZE, BUFFERS", sqlFlowKeysAvailable, "default", "k1", 10)
	nodes := planNodes(plan)
	probes := 0
	for _, n := range nodes {
		if n["Node Type"] == "Seq Scan" {
			t.Errorf("FlowKeysAvailable plan has a Seq Scan on %v", n["Relation Name"])
		}
		if n["Relation Name"] == "keel_job" {
			if n["Index Name"] != "keel_job_key_claim_idx" {
				t.Errorf("FlowKeysAvailable reads keel_job by %v %v", n["Node Type"], n["Index Name"])
			}
			probes++
			if rows, loops := n["Actual Rows"].(float64), n["Actual Loops"].(float64); rows > loops {
				t.Errorf("an index probe returned %v rows in %v loops, want at most one per loop", rows, loops)
			}
		}
	}
	if probes == 0 {
		t.Errorf("no keel_job access in plan")
	}
	blocks := plan["Shared Hit Blocks"].(float64) + plan["Shared Read Blocks"].(float64)
	t.Logf("FlowKeysAvailable over 205k available jobs: %v buffers", blocks)
	if blocks > 100 {
		t.Errorf("FlowKeysAvailable touched %v buffers; a skip scan over 3 keys needs a few dozen", blocks)
	}
	if got := availableKeys(t, flow(t, ex), "default", "k1", 10); !slices.Equal(got, []string{"", "k2", "k3", "k1"}) {
		t.Errorf("keys: %q", got)
	}

	// JobClaimKeys: no sort (the index gives the order), no scan of the
	// table, every keel_job read of the laterals is an index condition on
	// queue and flow_key.
	plan = explainJSON(t, d, "", sqlJobClaimKeys, []string{"k1", "", "k3"}, []int32{2, 2, 2}, "default", "w",
		int64(60e6), nil)
	var lateral int
	for _, n := range planNodes(plan) {
		if n["Node Type"] == "Sort" || n["Node Type"] == "Incremental Sort" {
			if keys := fmt.Sprint(n["Sort Key"]); strings.Contains(keys, "priority") || strings.Contains(keys, "id") {
				t.Errorf("JobClaimKeys plan sorts jobs: %v", keys)
			}
		}
		if n["Node Type"] == "Seq Scan" && n["Relation Name"] == "keel_job" {
			t.Errorf("JobClaimKeys plan has a Seq Scan on keel_job")
		}
		if n["Index Name"] == "keel_job_key_claim_idx" {
			lateral++
			cond, _ := n["Index Cond"].(string)
			if !strings.Contains(cond, "queue =") || !strings.Contains(cond, "flow_key") {
				t.Errorf("lateral index condition %q lacks queue or flow_key", cond)
			}
		}
	}
	if lateral != 2 {
		t.Errorf("JobClaimKeys plan reads keel_job_key_claim_idx %d times, want 2 (keys, no key)", lateral)
	}
	jobs, err := flow(t, ex).JobClaimKeys(ctx, &keeldriver.JobClaimKeysParams{Queue: "default", Owner: "w",
		LeaseDuration: time.Minute, Keys: []string{"k1", "", "k3"}, Ns: []int{2, 2, 2}})
	if err != nil || len(jobs) != 6 {
		t.Fatalf("claim: %d %v", len(jobs), err)
	}
	for _, j := range jobs {
		if j.Priority != 1 {
			t.Errorf("claimed job %d of priority %d before priority-1 jobs", j.ID, j.Priority)
		}
	}
}

// setKeyState locks key (creating its row), lets change edit it and saves.
func setKeyState(t *testing.T, ex keeldriver.Executor, key string, change func(*keeltype.FlowKeyRow)) {
	t.Helper()
	ctx := context.Background()
	tx, err := ex.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	fx := flow(t, tx)
	rows, err := fx.FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{Keys: []string{key}})
	if err != nil || len(rows) != 1 {
		t.Fatalf("lock %q: %v %v", key, rows, err)
	}
	change(rows[0])
	if err := fx.FlowKeysSave(ctx, rows, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestJobClaimKeys(t *testing.T) {
	d := newTestDriver(t)
	ctx := context.Background()
	ex := d.Executor()
	fx := flow(t, ex)
	ids := map[string][]int64{}
	for _, k := range []string{"a", "b", "", "paused", "open", "half"} {
		for i := range 4 {
			res := insert(t, ex, keyed(k, 4-i%2)) // priorities 4, 3, 4, 3
			ids[k] = append(ids[k], res[0].Job.ID)
		}
	}
	setKeyState(t, ex, "paused", func(r *keeltype.FlowKeyRow) { r.PausedAt = ptr(time.Now()) })
	setKeyState(t, ex, "open", func(r *keeltype.FlowKeyRow) { r.BreakerState = keeltype.BreakerOpen })
	setKeyState(t, ex, "half", func(r *keeltype.FlowKeyRow) { r.BreakerState = keeltype.BreakerHalfOpen })
	setKeyState(t, ex, "b", func(r *keeltype.FlowKeyRow) { r.ConsecutiveFailures = 3 }) // not gated

	now := time.Now().UTC().Truncate(time.Microsecond)
	jobs, err := fx.JobClaimKeys(ctx, &keeldriver.JobClaimKeysParams{
		Queue: "default", Owner: "w1", LeaseDuration: time.Minute, Now: &now,
		Keys: []string{"b", "", "a", "paused", "open", "half", "none"},
		Ns:   []int{10, 1, 2, 3, 3, 1, 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Input key order, then (priority, id).
	want := []int64{
		ids["b"][1], ids["b"][3], ids["b"][0], ids["b"][2],
		ids[""][1],
		ids["a"][1], ids["a"][3],
		ids["half"][1],
	}
	var got []int64
	for _, j := range jobs {
		got = append(got, j.ID)
		if j.State != keeltype.JobStateRunning || j.Fence != 1 || j.Attempt != 1 || j.LeaseOwner != "w1" ||
			j.LeaseExpiresAt == nil || !j.LeaseExpiresAt.Equal(now.Add(time.Minute)) ||
			j.AttemptedAt == nil || !j.AttemptedAt.Equal(now) {
			t.Errorf("claimed job %+v", j)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("claimed %v, want %v", got, want)
	}

	// A paused queue gives nothing, even for open keys.
	if _, err := ex.QueuePause(ctx, &keeldriver.QueuePauseParams{Name: "default"}); err != nil {
		t.Fatal(err)
	}
	jobs, err = fx.JobClaimKeys(ctx, &keeldriver.JobClaimKeysParams{Queue: "default", Owner: "w1",
		LeaseDuration: time.Minute, Keys: []string{"a", ""}, Ns: []int{5, 5}})
	if err != nil || len(jobs) != 0 {
		t.Fatalf("paused queue: %d jobs, %v", len(jobs), err)
	}
	if _, err := ex.QueueResume(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	// A repeated key adds up; n = 0 takes nothing.
	jobs, err = fx.JobClaimKeys(ctx, &keeldriver.JobClaimKeysParams{Queue: "default", Owner: "w2",
		LeaseDuration: time.Minute, Keys: []string{"a", "a", ""}, Ns: []int{1, 1, 0}})
	if err != nil || len(jobs) != 2 || jobs[0].ID != ids["a"][0] || jobs[1].ID != ids["a"][2] {
		t.Fatalf("repeated key: %+v %v", jobs, err)
	}

	for _, p := range []*keeldriver.JobClaimKeysParams{
		{Queue: "default", Owner: "w", LeaseDuration: time.Minute, Keys: []string{"a"}, Ns: []int{1, 2}},
		{Queue: "default", Owner: "w", Keys: []string{"a"}, Ns: []int{1}},
	} {
		if _, err := fx.JobClaimKeys(ctx, p); !errors.Is(err, keeltype.ErrInvalidArgument) {
			t.Errorf("%+v: err %v, want ErrInvalidArgument", p, err)
		}
	}
}

func TestJobClaimKeysConcurrentDisjoint(t *testing.T) {
	d := newTestDriver(t)
	ex := d.Executor()
	keys := []string{"", "a", "b", "c"}
	const perKey = 60
	var params []*keeldriver.JobInsertParams
	for i := range perKey {
		for _, k := range keys {
			params = append(params, keyed(k, 1+i%4))
		}
	}
	insert(t, ex, params...)

	var mu sync.Mutex
	seen := map[int64]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		owner := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			fx := flow(t, ex)
			for {
				jobs, err := fx.JobClaimKeys(context.Background(), &keeldriver.JobClaimKeysParams{
					Queue: "default", Owner: owner, LeaseDuration: time.Minute, Keys: keys, Ns: []int{2, 3, 1, 2},
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
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != len(params) {
		t.Fatalf("claimed %d distinct jobs, want %d", len(seen), len(params))
	}
}

func TestFlowKeysLock(t *testing.T) {
	d := newTestDriver(t)
	ctx := context.Background()
	ex := d.Executor()
	insert(t, ex, keyed("a", 1), keyed("a", 1), keyed("a", 1), keyed("b", 1))
	if _, err := flow(t, ex).JobClaimKeys(ctx, &keeldriver.JobClaimKeysParams{Queue: "default", Owner: "w",
		LeaseDuration: time.Minute, Keys: []string{"a"}, Ns: []int{2}}); err != nil {
		t.Fatal(err)
	}

	tx1, err := ex.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(ctx)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	rows, err := flow(t, tx1).FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{Keys: []string{"b", "a", "b"}, SkipLocked: true, Now: &now})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Key != "a" || rows[1].Key != "b" || rows[0].Running != 2 || rows[1].Running != 0 {
		t.Fatalf("locked rows: %+v %+v", rows[0], rows[1])
	}
	if r := rows[0]; r.BreakerState != keeltype.BreakerClosed || !r.UpdatedAt.Equal(now) || r.Tokens != 0 ||
		string(r.PauseContext) != "{}" || r.PausedAt != nil {
		t.Errorf("new row: %+v", r)
	}

	// Another transaction skips the held rows but gets (and creates) c. The
	// rows of a and b are not even committed yet: creating them must not
	// wait for tx1 either (a plain INSERT ... ON CONFLICT would).
	tx2, err := ex.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback(ctx)
	quick, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err = flow(t, tx2).FlowKeysLock(quick, &keeldriver.FlowKeysLockParams{Keys: []string{"a", "b", "c"}, SkipLocked: true})
	if err != nil || len(rows) != 1 || rows[0].Key != "c" {
		t.Fatalf("second locker: %+v %v", rows, err)
	}
	if err := tx2.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// Without SkipLocked the call waits for the holder.
	done := make(chan []*keeltype.FlowKeyRow, 1)
	go func() {
		tx3, err := ex.Begin(ctx)
		if err != nil {
			t.Error(err)
			done <- nil
			return
		}
		rows, err := flow(t, tx3).FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{Keys: []string{"a", "c"}})
		if err != nil {
			t.Error(err)
		}
		// Release before reporting: the pool lock below must find a free.
		if err := tx3.Rollback(ctx); err != nil {
			t.Error(err)
		}
		done <- rows
	}()
	select {
	case rows := <-done:
		t.Fatalf("waiting lock returned while held: %+v", rows)
	case <-time.After(200 * time.Millisecond):
	}
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case rows := <-done:
		if len(rows) != 2 || rows[0].Key != "a" || rows[1].Key != "c" {
			t.Fatalf("waiting locker got %+v", rows)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiting lock never returned")
	}

	// The pool executor works too (the lock ends with the statement).
	rows, err = flow(t, ex).FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{Keys: []string{"a"}, SkipLocked: true})
	if err != nil || len(rows) != 1 || rows[0].Running != 2 {
		t.Fatalf("pool lock: %+v %v", rows, err)
	}
	if rows, err := flow(t, ex).FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{}); err != nil || len(rows) != 0 {
		t.Fatalf("no keys: %v %v", rows, err)
	}
}

func TestFlowKeysSaveAndRead(t *testing.T) {
	d := newTestDriver(t)
	ctx := context.Background()
	ex := d.Executor()
	fx := flow(t, ex)
	if _, err := fx.FlowKeyGet(ctx, "a"); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}

	tx, err := ex.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	keys := []string{"app:1", "app:2", "app%3", "app_4", "ap", "zz"}
	rows, err := flow(t, tx).FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{Keys: keys, SkipLocked: true})
	if err != nil || len(rows) != len(keys) {
		t.Fatalf("lock: %v %v", rows, err)
	}
	at := func(s int) *time.Time { return ptr(time.Date(2030, 1, 1, 0, 0, s, 123000, time.UTC)) }
	byKey := map[string]*keeltype.FlowKeyRow{}
	for _, r := range rows {
		byKey[r.Key] = r
	}
	full := byKey["app:1"]
	*full = keeltype.FlowKeyRow{
		Key: "app:1", Tokens: 2.5, TokensAt: at(1), PausedAt: at(2), PausedBy: "user:bob",
		PauseReason: "auto", PauseContext: json.RawMessage(`{"failures": 5}`), BreakerState: keeltype.BreakerHalfOpen,
		BreakerOpenedAt: at(3), BreakerProbesLeft: 2, ConsecutiveFailures: 5, WindowStart: at(4),
		WindowCalls: 10, WindowFailures: 6, RampStartedAt: at(5), LastError: "boom", LastFailureClass: "error",
		LastFailureAt: at(6), LastSuccessAt: at(7),
	}
	byKey["app%3"].BreakerState = keeltype.BreakerOpen
	byKey["zz"].PausedAt = at(8)
	saved := *at(9)
	if err := flow(t, tx).FlowKeysSave(ctx, rows, &saved); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	got, err := fx.FlowKeyGet(ctx, "app:1")
	if err != nil {
		t.Fatal(err)
	}
	want := *full
	want.UpdatedAt = saved
	want.PauseContext = json.RawMessage(`{"failures": 5}`)
	if !reflect.DeepEqual(got, &want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, &want)
	}
	// Saving with the database clock.
	got.Tokens = 1
	if err := fx.FlowKeysSave(ctx, []*keeltype.FlowKeyRow{got}, nil); err != nil {
		t.Fatal(err)
	}
	if again, _ := fx.FlowKeyGet(ctx, "app:1"); again.Tokens != 1 || time.Since(again.UpdatedAt) > time.Minute {
		t.Fatalf("saved with db clock: %+v", again)
	}

	list := func(p keeldriver.FlowKeyListParams) []string {
		t.Helper()
		rows, err := fx.FlowKeyList(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			out = append(out, r.Key)
		}
		return out
	}
	for _, tc := range []struct {
		p    keeldriver.FlowKeyListParams
		want []string
	}{
		{keeldriver.FlowKeyListParams{}, []string{"ap", "app%3", "app:1", "app:2", "app_4", "zz"}},
		{keeldriver.FlowKeyListParams{Limit: 2}, []string{"ap", "app%3"}},
		{keeldriver.FlowKeyListParams{After: "app%3", Limit: 2}, []string{"app:1", "app:2"}},
		{keeldriver.FlowKeyListParams{Prefix: "app"}, []string{"app%3", "app:1", "app:2", "app_4"}},
		{keeldriver.FlowKeyListParams{Prefix: "app:", After: "app:1"}, []string{"app:2"}},
		{keeldriver.FlowKeyListParams{Prefix: "app%"}, []string{"app%3"}}, // literal, not a wildcard
		{keeldriver.FlowKeyListParams{Prefix: "app_"}, []string{"app_4"}},
		{keeldriver.FlowKeyListParams{OnlyPaused: true}, []string{"app:1", "zz"}},
		{keeldriver.FlowKeyListParams{OnlyTripped: true}, []string{"app%3", "app:1"}},
		{keeldriver.FlowKeyListParams{OnlyPaused: true, OnlyTripped: true}, []string{"app:1"}},
	} {
		if got := list(tc.p); !slices.Equal(got, tc.want) {
			t.Errorf("list %+v: got %q, want %q", tc.p, got, tc.want)
		}
	}

	// Stats: counts by state, oldest available, state row when present.
	past := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	old := keyed("app:1", 2)
	old.RunAt = &past
	insert(t, ex, old, keyed("app:1", 2), keyed("app:1", 2), keyed("nostate", 2))
	stats, err := fx.FlowKeyStats(ctx, []string{"nostate", "app:1", "none", "app:1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 3 || stats[0].Key != "nostate" || stats[1].Key != "app:1" || stats[2].Key != "none" {
		t.Fatalf("stats keys: %+v", stats)
	}
	if s := stats[0]; s.State != nil || s.Counts[keeltype.JobStateAvailable] != 1 || s.OldestAvailable == nil {
		t.Errorf("nostate: %+v", s)
	}
	if s := stats[1]; s.State == nil || s.State.PausedBy != "user:bob" || s.Counts[keeltype.JobStateAvailable] != 3 ||
		s.OldestAvailable == nil || !s.OldestAvailable.Equal(past) {
		t.Errorf("app:1: %+v", s)
	}
	if s := stats[2]; s.State != nil || len(s.Counts) != 0 || s.OldestAvailable != nil {
		t.Errorf("none: %+v", s)
	}
	// app:1 is paused (JobClaimKeys would skip it); the plain claim takes
	// its oldest job.
	if got := claim(t, ex, "default", "w", 1); len(got) != 1 || got[0].FlowKey != "app:1" {
		t.Fatalf("claim: %+v", got)
	}
	stats, _ = fx.FlowKeyStats(ctx, []string{"app:1"})
	if s := stats[0]; s.Counts[keeltype.JobStateRunning] != 1 || s.Counts[keeltype.JobStateAvailable] != 2 || s.State.Running != 1 {
		t.Errorf("after claim: %+v %+v", s, s.State)
	}
}

func TestFlowLimits(t *testing.T) {
	d := newTestDriver(t)
	ctx := context.Background()
	fx := flow(t, d.Executor())
	if list, err := fx.FlowLimitList(ctx); err != nil || len(list) != 0 {
		t.Fatalf("empty list: %v %v", list, err)
	}
	at := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	in := &keeltype.FlowLimit{
		Pattern: "app:*", Queue: "default", Rate: 2.5, Burst: 3, MaxRunning: 4, BreakerFailures: 5,
		BreakerRatio: 0.5, BreakerWindow: 90 * time.Second, BreakerMinCalls: 6, BreakerCooldown: 1500 * time.Millisecond,
		BreakerProbes: 2, AutoPauseFailures: 7, Weight: 3,
		Ramp:      []keeltype.RampStep{{After: time.Minute, Rate: 1}, {After: 2 * time.Minute, Rate: 2}},
		UpdatedAt: at, UpdatedBy: "user:ann",
	}
	got, err := fx.FlowLimitUpsert(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("stored:\n got %+v\nwant %+v", got, in)
	}
	var ramp string
	if err := d.pool.QueryRow(ctx, "SELECT ramp::text FROM keel_flow_limit WHERE pattern = 'app:*'").Scan(&ramp); err != nil ||
		ramp != `[{"rate": 1, "after": 60000}, {"rate": 2, "after": 120000}]` {
		t.Errorf("ramp stored as %s (%v)", ramp, err)
	}

	// Update in place; zero weight stored as 1, sub-millisecond durations
	// truncated, zero UpdatedAt = database clock.
	upd := &keeltype.FlowLimit{Pattern: "app:*", Queue: "default", Rate: 1, BreakerWindow: 1500 * time.Microsecond}
	got, err = fx.FlowLimitUpsert(ctx, upd)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rate != 1 || got.Burst != 0 || got.Weight != 1 || got.Ramp != nil || got.BreakerWindow != time.Millisecond ||
		got.UpdatedBy != "" || time.Since(got.UpdatedAt) > time.Minute {
		t.Fatalf("updated: %+v", got)
	}
	for _, l := range []*keeltype.FlowLimit{{Pattern: "*"}, {Pattern: "app:*"}, {Pattern: "app:1", Queue: "x"}} {
		if _, err := fx.FlowLimitUpsert(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	list, err := fx.FlowLimitList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range list {
		names = append(names, l.Pattern+"|"+l.Queue)
	}
	if !slices.Equal(names, []string{"*|", "app:*|", "app:*|default", "app:1|x"}) {
		t.Fatalf("list: %q", names)
	}

	if err := fx.FlowLimitDelete(ctx, "app:*", "default"); err != nil {
		t.Fatal(err)
	}
	if err := fx.FlowLimitDelete(ctx, "app:*", "default"); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("delete again: %v", err)
	}
	for _, l := range []*keeltype.FlowLimit{
		nil, {}, {Pattern: "x", BreakerRatio: 2}, {Pattern: "x", Rate: -1}, {Pattern: "x", Weight: 1001},
	} {
		if _, err := fx.FlowLimitUpsert(ctx, l); !errors.Is(err, keeltype.ErrInvalidArgument) {
			t.Errorf("upsert %+v: %v, want ErrInvalidArgument", l, err)
		}
	}
}

func TestJobAgePriorities(t *testing.T) {
	d := newTestDriver(t)
	ctx := context.Background()
	ex := d.Executor()
	fx := flow(t, ex)
	t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	mk := func(priority int) *keeldriver.JobInsertParams {
		p := keyed("", priority)
		p.RunAt = &t0
		return p
	}
	res := insert(t, ex, mk(4), mk(3), mk(1), mk(4))
	id4, id3, id1, idRun := res[0].Job.ID, res[1].Job.ID, res[2].Job.ID, res[3].Job.ID
	// Only available jobs age.
	if _, err := ex.JobCancel(ctx, &keeldriver.JobCancelParams{ID: idRun}); err != nil {
		t.Fatal(err)
	}
	const interval = 10 * time.Second
	age := func(now time.Time, max int) int {
		t.Helper()
		n, err := fx.JobAgePriorities(ctx, &keeldriver.JobAgeParams{Interval: interval, Max: max, Now: &now})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	check := func(id int64, priority int, base *int) {
		t.Helper()
		var p int
		var b *int
		if err := d.pool.QueryRow(ctx, "SELECT priority, base_priority FROM keel_job WHERE id = $1", id).Scan(&p, &b); err != nil {
			t.Fatal(err)
		}
		if p != priority || (b == nil) != (base == nil) || (b != nil && *b != *base) {
			t.Errorf("job %d: priority %d base %v, want %d %v", id, p, b, priority, base)
		}
	}

	if n := age(t0.Add(interval/2), 0); n != 0 {
		t.Fatalf("before one interval: aged %d", n)
	}
	if n := age(t0.Add(interval+interval/2), 0); n != 2 {
		t.Fatalf("after one interval: aged %d, want 2", n)
	}
	check(id4, 3, ptr(4))
	check(id3, 2, ptr(3))
	check(id1, 1, nil)
	check(idRun, 4, nil)
	// Same time again: the next level needs two intervals.
	if n := age(t0.Add(interval+interval/2), 0); n != 0 {
		t.Fatalf("same time: aged %d", n)
	}
	// Max bounds one call.
	if n := age(t0.Add(2*interval+interval/2), 1); n != 1 {
		t.Fatalf("max 1: aged %d", n)
	}
	if n := age(t0.Add(2*interval+interval/2), 0); n != 1 {
		t.Fatalf("rest: aged %d", n)
	}
	check(id4, 2, ptr(4))
	check(id3, 1, ptr(3))
	if n := age(t0.Add(time.Hour), 0); n != 1 { // id3 is at 1 already
		t.Fatalf("later: aged %d", n)
	}
	check(id4, 1, ptr(4))
	// Aged jobs claim and read like any other (the scan ignores base_priority).
	jobs := claim(t, ex, "default", "w", 10)
	if len(jobs) != 3 || jobs[0].ID != id4 || jobs[0].Priority != 1 {
		t.Fatalf("claimed %+v", jobs)
	}
	if _, err := fx.JobAgePriorities(ctx, &keeldriver.JobAgeParams{}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("zero interval: %v", err)
	}
}
