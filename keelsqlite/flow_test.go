package keelsqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// keyed is an available job of queue q with flow key k ("" = none) and
// priority p.
func keyed(q, k string, p int) *keeldriver.JobInsertParams {
	return &keeldriver.JobInsertParams{Kind: "k", Queue: q, FlowKey: k, Priority: p, RunAt: at(-time.Hour)}
}

func availableKeys(t *testing.T, d *Driver, queue, after string, limit int) []string {
	t.Helper()
	keys, err := d.Executor().(keeldriver.FlowExecutor).FlowKeysAvailable(context.Background(), &keeldriver.FlowKeysAvailableParams{
		Queue: queue, After: after, Limit: limit,
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func claimKeys(t *testing.T, ex keeldriver.Executor, queue string, keys []string, ns []int) []*keeltype.JobRow {
	t.Helper()
	rows, err := ex.(keeldriver.FlowExecutor).JobClaimKeys(context.Background(), &keeldriver.JobClaimKeysParams{
		Queue: queue, Owner: "w1", LeaseDuration: time.Minute, Keys: keys, Ns: ns, Now: at(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func lockKeys(t *testing.T, ex keeldriver.Executor, keys ...string) []*keeltype.FlowKeyRow {
	t.Helper()
	rows, err := ex.(keeldriver.FlowExecutor).FlowKeysLock(context.Background(), &keeldriver.FlowKeysLockParams{
		Keys: keys, SkipLocked: true, Now: at(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func saveKeys(t *testing.T, ex keeldriver.Executor, rows ...*keeltype.FlowKeyRow) {
	t.Helper()
	if err := ex.(keeldriver.FlowExecutor).FlowKeysSave(context.Background(), rows, at(time.Second)); err != nil {
		t.Fatal(err)
	}
}

func ids(jobs []*keeltype.JobRow) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func flowKeyNames(rows []*keeltype.FlowKeyRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key
	}
	return out
}

// queryPlan returns the detail lines of EXPLAIN QUERY PLAN for a named
// statement.
func queryPlan(t *testing.T, d *Driver, name string, args ...any) []string {
	t.Helper()
	rows, err := d.r.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+queries.Get(name), args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		out = append(out, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// assertNoJobScan fails if the plan walks keel_job (under any of the aliases
// the statement uses) other than by an index search, or never uses index.
func assertNoJobScan(t *testing.T, plan []string, index string, aliases ...string) {
	t.Helper()
	used := false
	for _, line := range plan {
		for _, a := range append(aliases, "keel_job") {
			if strings.HasPrefix(line, "SCAN "+a+" ") || line == "SCAN "+a {
				t.Errorf("plan scans %s: %q\n%s", a, line, strings.Join(plan, "\n"))
			}
		}
		if strings.Contains(line, "SEARCH") && strings.Contains(line, index) {
			used = true
		}
	}
	if !used {
		t.Errorf("plan never searches %s:\n%s", index, strings.Join(plan, "\n"))
	}
}

func TestFlowKeysAvailable(t *testing.T) {
	d := openTest(t)
	future := time.Now().Add(time.Hour)
	insert(t, d,
		keyed("q", "d", 2), keyed("q", "b", 2), keyed("q", "b", 1), keyed("q", "a", 4),
		keyed("q", "c", 2), keyed("q", "", 2), keyed("q", "", 3),
		keyed("other", "x", 2), keyed("other", "a", 2), // other queue
		&keeldriver.JobInsertParams{Kind: "k", Queue: "q", FlowKey: "z", RunAt: &future}, // scheduled
	)
	// A key whose only job is running is not available.
	insert(t, d, keyed("q2", "e", 1))
	claim(t, d, "q2", "w", 1, nil)

	cases := []struct {
		after string
		limit int
		want  []string
	}{
		{"", 10, []string{"", "a", "b", "c", "d"}},
		{"b", 10, []string{"", "c", "d", "a", "b"}},
		{"b", 3, []string{"", "c", "d"}},
		{"d", 10, []string{"", "a", "b", "c", "d"}},
		{"bb", 10, []string{"", "c", "d", "a", "b"}},
		{"zz", 2, []string{"", "a"}},
		{"a", 1, []string{""}},
	}
	for _, c := range cases {
		if got := availableKeys(t, d, "q", c.after, c.limit); !slices.Equal(got, c.want) {
			t.Errorf("after %q limit %d: got %q want %q", c.after, c.limit, got, c.want)
		}
	}
	if got := availableKeys(t, d, "q", "", 0); got != nil {
		t.Errorf("limit 0: %q", got)
	}
	// No keyless jobs: no "".
	if got := availableKeys(t, d, "other", "a", 10); !slices.Equal(got, []string{"x", "a"}) {
		t.Errorf("other: %q", got)
	}
	if got := availableKeys(t, d, "q2", "", 10); len(got) != 0 {
		t.Errorf("only running: %q", got)
	}
	if got := availableKeys(t, d, "nope", "", 10); len(got) != 0 {
		t.Errorf("empty queue: %q", got)
	}

	// Once the "" jobs are claimed, the list starts with keys.
	claimKeys(t, d.Executor(), "q", []string{""}, []int{5})
	if got := availableKeys(t, d, "q", "c", 10); !slices.Equal(got, []string{"d", "a", "b", "c"}) {
		t.Errorf("after claiming keyless: %q", got)
	}

	plan := queryPlan(t, d, "FlowKeysAvailable",
		sql.Named("queue", "q"), sql.Named("after", "b"), sql.Named("limit", 10))
	assertNoJobScan(t, plan, "keel_job_key_claim_idx", "j")
}

func TestFlowKeysAvailableSkipsBacklog(t *testing.T) {
	// A deep backlog under few keys: each key costs one probe. A scan would
	// give the same result, so cost is checked on the plans, which ANALYZE
	// statistics must not change (INDEXED BY).
	d := openTest(t)
	ctx := context.Background()
	err := d.Executor().Exec(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 30000)
		INSERT INTO keel_job (kind, queue, state, priority, run_at, created_at, flow_key)
		SELECT 'k', 'q', 'available', 1 + i % 4, 0, 0, CASE i % 3 WHEN 0 THEN 'k0' WHEN 1 THEN 'k1' ELSE NULL END FROM n;
		ANALYZE;`)
	if err != nil {
		t.Fatal(err)
	}
	if got := availableKeys(t, d, "q", "k0", 10); !slices.Equal(got, []string{"", "k1", "k0"}) {
		t.Fatalf("got %q", got)
	}
	assertNoJobScan(t, queryPlan(t, d, "FlowKeysAvailable",
		sql.Named("queue", "q"), sql.Named("after", "k0"), sql.Named("limit", 10)), "keel_job_key_claim_idx", "j")
	plan := queryPlan(t, d, "JobClaimKeys",
		sql.Named("wanted", `[{"key":"k0","n":3},{"key":"","n":2}]`), sql.Named("queue", "q"),
		sql.Named("owner", "w"), sql.Named("lease_expires_at", 1), sql.Named("now", 0))
	assertNoJobScan(t, plan, "keel_job_key_claim_idx", "j", "c")
	// The walk's step seeks the next id within the priority level (a seek on
	// priority alone would rescan the level at every step).
	if !slices.ContainsFunc(plan, func(l string) bool { return strings.Contains(l, "priority=? AND id>?") }) {
		t.Errorf("claim walk does not seek (priority, id):\n%s", strings.Join(plan, "\n"))
	}

	// Deep keys claim in (priority, id) order across levels.
	got := claimKeys(t, d.Executor(), "q", []string{"k1"}, []int{2500})
	if len(got) != 2500 {
		t.Fatalf("claimed %d", len(got))
	}
	for i := 1; i < len(got); i++ {
		a, b := got[i-1], got[i]
		if a.Priority > b.Priority || (a.Priority == b.Priority && a.ID >= b.ID) {
			t.Fatalf("order at %d: (%d,%d) then (%d,%d)", i, a.Priority, a.ID, b.Priority, b.ID)
		}
	}
	var rest int
	err = d.r.QueryRowContext(ctx, `SELECT count(*) FROM keel_job WHERE flow_key = 'k1' AND state = 'available'
		AND (priority, id) < (?, ?)`, got[len(got)-1].Priority, got[len(got)-1].ID).Scan(&rest)
	if err != nil || rest != 0 {
		t.Fatalf("skipped %d earlier jobs (%v)", rest, err)
	}
}

func TestJobClaimKeys(t *testing.T) {
	d := openTest(t)
	ctx := context.Background()
	a := insert(t, d, keyed("q", "a", 3), keyed("q", "a", 1), keyed("q", "a", 2), keyed("q", "a", 1), keyed("q", "a", 4))
	b := insert(t, d, keyed("q", "b", 2), keyed("q", "b", 2))
	none := insert(t, d, keyed("q", "", 2), keyed("q", "", 1), keyed("q", "", 2))
	insert(t, d, keyed("q", "paused", 1), keyed("q", "open", 1), keyed("q", "half", 1))
	insert(t, d, keyed("other", "a", 1))

	gates := lockKeys(t, d.Executor(), "paused", "open", "half") // comes back in key order
	gates[0].BreakerState = keeltype.BreakerHalfOpen             // "half"
	gates[1].BreakerState = keeltype.BreakerOpen                 // "open"
	gates[2].PausedAt = at(0)                                    // "paused"
	saveKeys(t, d.Executor(), gates...)
	if g, _ := d.Executor().(keeldriver.FlowExecutor).FlowKeyGet(ctx, "paused"); g.PausedAt == nil {
		t.Fatal("paused key not saved as paused")
	}

	got := claimKeys(t, d.Executor(), "q",
		[]string{"b", "a", "", "paused", "open", "half", "missing"}, []int{5, 3, 2, 3, 3, 1, 2})
	want := []int64{b[0].ID, b[1].ID, a[1].ID, a[3].ID, a[2].ID, none[1].ID, none[0].ID}
	gotIDs := ids(got)
	if !slices.Equal(gotIDs[:len(want)], want) || len(gotIDs) != len(want)+1 || got[len(got)-1].FlowKey != "half" {
		t.Fatalf("claimed %v (keys %v), want %v then the half-open key", gotIDs, keysOf(got), want)
	}
	for _, j := range got {
		if j.State != keeltype.JobStateRunning || j.Attempt != 1 || j.Fence != 1 || j.LeaseOwner != "w1" ||
			j.LeaseExpiresAt == nil || !j.LeaseExpiresAt.Equal(t0.Add(time.Minute)) ||
			j.AttemptedAt == nil || !j.AttemptedAt.Equal(t0) || j.Queue != "q" {
			t.Fatalf("claimed row %+v", j)
		}
	}
	// A repeated key is claimed once with the counts added; zero counts and
	// keys without jobs claim nothing.
	got = claimKeys(t, d.Executor(), "q", []string{"a", "b", "a"}, []int{1, 0, 1})
	if !slices.Equal(ids(got), []int64{a[0].ID, a[4].ID}) {
		t.Fatalf("repeated key: %v", ids(got))
	}
	if got := claimKeys(t, d.Executor(), "q", []string{"a", "b"}, []int{0, 0}); got != nil {
		t.Fatalf("zero counts: %v", ids(got))
	}
	// The other queue's job of key "a" is untouched.
	if got := claimKeys(t, d.Executor(), "other", []string{"a"}, []int{5}); len(got) != 1 || got[0].Queue != "other" {
		t.Fatalf("other queue: %+v", got)
	}

	// Resuming the paused key makes it claimable.
	st := lockKeys(t, d.Executor(), "paused")
	st[0].PausedAt = nil
	saveKeys(t, d.Executor(), st...)
	if got := claimKeys(t, d.Executor(), "q", []string{"paused"}, []int{1}); len(got) != 1 {
		t.Fatalf("resumed key: %+v", got)
	}

	fx := d.Executor().(keeldriver.FlowExecutor)
	_, err := fx.JobClaimKeys(ctx, &keeldriver.JobClaimKeysParams{Queue: "q", LeaseDuration: time.Minute, Keys: []string{"a"}})
	if !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("mismatched counts: %v", err)
	}
	_, err = fx.JobClaimKeys(ctx, &keeldriver.JobClaimKeysParams{Queue: "q", Keys: []string{"a"}, Ns: []int{1}})
	if !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("no lease: %v", err)
	}
}

func keysOf(jobs []*keeltype.JobRow) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.FlowKey
	}
	return out
}

func TestJobClaimKeysPausedQueueAndTx(t *testing.T) {
	d := openTest(t)
	ctx := context.Background()
	jobs := insert(t, d, keyed("q", "a", 2), keyed("q", "", 2))
	if _, err := d.Executor().QueuePause(ctx, &keeldriver.QueuePauseParams{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	if got := claimKeys(t, d.Executor(), "q", []string{"a", ""}, []int{1, 1}); len(got) != 0 {
		t.Fatalf("paused queue: %v", ids(got))
	}
	if _, err := d.Executor().QueueResume(ctx, "q"); err != nil {
		t.Fatal(err)
	}

	// Inside a transaction: the claim is part of it and goes with a rollback.
	tx, err := d.Executor().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := claimKeys(t, tx, "q", []string{"a", ""}, []int{1, 1}); len(got) != 2 {
		t.Fatalf("in tx: %v", ids(got))
	}
	if j, err := tx.JobGet(ctx, jobs[0].ID); err != nil || j.State != keeltype.JobStateRunning {
		t.Fatalf("in tx: %+v %v", j, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if got := get(t, d, j.ID); got.State != keeltype.JobStateAvailable || got.Fence != 0 {
			t.Fatalf("after rollback: %+v", got)
		}
	}
}

func TestFlowKeysLock(t *testing.T) {
	d := openTest(t)
	ctx := context.Background()
	insert(t, d, keyed("q", "a", 2), keyed("q", "a", 2), keyed("q", "a", 2), keyed("q", "b", 2), keyed("q", "", 2))
	claimKeys(t, d.Executor(), "q", []string{"a", ""}, []int{2, 1})

	rows := lockKeys(t, d.Executor(), "c", "a", "b", "a")
	if got := flowKeyNames(rows); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("keys %q", got)
	}
	for i, want := range []int{2, 0, 0} {
		r := rows[i]
		if r.Running != want || r.BreakerState != keeltype.BreakerClosed || string(r.PauseContext) != "{}" ||
			!r.UpdatedAt.Equal(t0) || r.PausedAt != nil || r.Tokens != 0 {
			t.Fatalf("row %d: %+v", i, r)
		}
	}
	// Locking again keeps the rows (and their updated_at).
	again, err := d.Executor().(keeldriver.FlowExecutor).FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{Keys: []string{"a"}})
	if err != nil || len(again) != 1 || !again[0].UpdatedAt.Equal(t0) || again[0].Running != 2 {
		t.Fatalf("again: %+v %v", again, err)
	}
	// "" may have a state row; no job counts for it.
	if r := lockKeys(t, d.Executor(), ""); len(r) != 1 || r[0].Key != "" || r[0].Running != 0 {
		t.Fatalf("empty key: %+v", r)
	}
	if r, err := d.Executor().(keeldriver.FlowExecutor).FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{}); r != nil || err != nil {
		t.Fatalf("no keys: %v %v", r, err)
	}

	// Inside Begin(): lock, change, save, commit. Meanwhile another writer
	// waits for the transaction (the write lock stands for the row locks).
	tx, err := d.Executor().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	locked := lockKeys(t, tx, "a", "d")
	locked[0].ConsecutiveFailures = 7
	saveKeys(t, tx, locked...)
	done := make(chan []*keeltype.FlowKeyRow)
	go func() {
		rows, err := d.Executor().(keeldriver.FlowExecutor).FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{Keys: []string{"a"}})
		if err != nil {
			t.Error(err)
		}
		done <- rows
	}()
	select {
	case <-done:
		t.Fatal("a second locker ran while the transaction held the keys")
	case <-time.After(100 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if rows := <-done; len(rows) != 1 || rows[0].ConsecutiveFailures != 7 {
		t.Fatalf("after commit: %+v", rows)
	}
	if _, err := d.Executor().(keeldriver.FlowExecutor).FlowKeyGet(ctx, "d"); err != nil {
		t.Fatalf("row created in tx: %v", err)
	}
}

func TestFlowKeysSaveRoundTrip(t *testing.T) {
	d := openTest(t)
	ctx := context.Background()
	fx := d.Executor().(keeldriver.FlowExecutor)
	if _, err := fx.FlowKeyGet(ctx, "k"); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	rows := lockKeys(t, d.Executor(), "k")
	r := rows[0]
	*r = keeltype.FlowKeyRow{
		Key:                 "k",
		Tokens:              2.5,
		TokensAt:            at(1 * time.Second),
		PausedAt:            at(2 * time.Second),
		PausedBy:            "ops",
		PauseReason:         "too many failures",
		PauseContext:        json.RawMessage(`{"failures":5}`),
		BreakerState:        keeltype.BreakerHalfOpen,
		BreakerOpenedAt:     at(3 * time.Second),
		BreakerProbesLeft:   2,
		ConsecutiveFailures: 5,
		WindowStart:         at(4 * time.Second),
		WindowCalls:         10,
		WindowFailures:      6,
		RampStartedAt:       at(5*time.Second + time.Microsecond),
		LastError:           "boom",
		LastFailureClass:    "error",
		LastFailureAt:       at(6 * time.Second),
		LastSuccessAt:       at(7 * time.Second),
		Running:             99, // not stored
	}
	// A row without a state row is ignored.
	saveKeys(t, d.Executor(), r, &keeltype.FlowKeyRow{Key: "ghost"})
	if _, err := fx.FlowKeyGet(ctx, "ghost"); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("ghost: %v", err)
	}
	got, err := fx.FlowKeyGet(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	want := *r
	want.Running = 0
	want.UpdatedAt = t0.Add(time.Second)
	if !reflect.DeepEqual(got, &want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, &want)
	}
	// Clearing works too (NULLs, closed breaker by default, {} context).
	saveKeys(t, d.Executor(), &keeltype.FlowKeyRow{Key: "k"})
	got, _ = fx.FlowKeyGet(ctx, "k")
	if got.PausedAt != nil || got.TokensAt != nil || got.BreakerState != keeltype.BreakerClosed ||
		string(got.PauseContext) != "{}" || got.LastError != "" {
		t.Fatalf("cleared: %+v", got)
	}
	// A breaker state outside the CHECK is an invalid argument.
	err = fx.FlowKeysSave(ctx, []*keeltype.FlowKeyRow{{Key: "k", BreakerState: "ajar"}}, nil)
	if !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("bad breaker state: %v", err)
	}
}

func TestFlowKeyListAndStats(t *testing.T) {
	d := openTest(t)
	ctx := context.Background()
	fx := d.Executor().(keeldriver.FlowExecutor)
	rows := lockKeys(t, d.Executor(), "app:1", "app:2", "app:3", "b%1", "", "app_x")
	// rows: "", app:1, app:2, app:3, app_x, b%1
	rows[1].PausedAt = at(0)
	rows[2].BreakerState = keeltype.BreakerOpen
	rows[3].BreakerState = keeltype.BreakerHalfOpen
	rows[5].PausedAt = at(0)
	saveKeys(t, d.Executor(), rows...)
	// app:3 is half-open, so claimable.
	insert(t, d, keyed("q", "app:3", 2), keyed("q", "app:3", 2), keyed("q", "app:3", 3))
	if got := claimKeys(t, d.Executor(), "q", []string{"app:3"}, []int{1}); len(got) != 1 {
		t.Fatalf("claimed %d", len(got))
	}

	list := func(p keeldriver.FlowKeyListParams) []string {
		t.Helper()
		got, err := fx.FlowKeyList(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range got {
			if want := map[string]int{"app:3": 1}[r.Key]; r.Running != want {
				t.Fatalf("running of %q: %d", r.Key, r.Running)
			}
		}
		return flowKeyNames(got)
	}
	cases := []struct {
		p    keeldriver.FlowKeyListParams
		want []string
	}{
		{keeldriver.FlowKeyListParams{}, []string{"", "app:1", "app:2", "app:3", "app_x", "b%1"}},
		{keeldriver.FlowKeyListParams{Limit: 2}, []string{"", "app:1"}},
		{keeldriver.FlowKeyListParams{Limit: 2, After: "app:1"}, []string{"app:2", "app:3"}},
		{keeldriver.FlowKeyListParams{Limit: 2, After: "app_x"}, []string{"b%1"}},
		{keeldriver.FlowKeyListParams{Prefix: "app:"}, []string{"app:1", "app:2", "app:3"}},
		{keeldriver.FlowKeyListParams{Prefix: "app:", After: "app:1"}, []string{"app:2", "app:3"}},
		{keeldriver.FlowKeyListParams{Prefix: "app_"}, []string{"app_x"}},
		{keeldriver.FlowKeyListParams{Prefix: "b%"}, []string{"b%1"}},
		{keeldriver.FlowKeyListParams{Prefix: "b", After: "a"}, []string{"b%1"}},
		{keeldriver.FlowKeyListParams{OnlyPaused: true}, []string{"app:1", "b%1"}},
		{keeldriver.FlowKeyListParams{OnlyTripped: true}, []string{"app:2", "app:3"}},
		{keeldriver.FlowKeyListParams{OnlyTripped: true, OnlyPaused: true}, nil},
		{keeldriver.FlowKeyListParams{Prefix: "zz"}, nil},
	}
	for _, c := range cases {
		if got := list(c.p); !slices.Equal(got, c.want) {
			t.Errorf("%+v: got %q want %q", c.p, got, c.want)
		}
	}

	// Stats: app:3 has one running and two available jobs, app:9 has jobs
	// but no state row, nope has neither. Order as given, duplicates once.
	old := insert(t, d, &keeldriver.JobInsertParams{Kind: "k", Queue: "q", FlowKey: "app:9", RunAt: at(-2 * time.Hour)})
	insert(t, d, keyed("q", "app:9", 2), keyed("q", "", 2))
	stats, err := fx.FlowKeyStats(ctx, []string{"app:9", "app:3", "nope", "app:3", ""})
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 4 {
		t.Fatalf("stats: %d entries", len(stats))
	}
	s9, s2, sn, se := stats[0], stats[1], stats[2], stats[3]
	if s9.Key != "app:9" || s9.Counts[keeltype.JobStateAvailable] != 2 || len(s9.Counts) != 1 ||
		s9.OldestAvailable == nil || !s9.OldestAvailable.Equal(old[0].RunAt) || s9.State != nil {
		t.Fatalf("app:9: %+v", s9)
	}
	if s2.Key != "app:3" || s2.Counts[keeltype.JobStateAvailable] != 2 || s2.Counts[keeltype.JobStateRunning] != 1 ||
		s2.OldestAvailable == nil || s2.State == nil || s2.State.BreakerState != keeltype.BreakerHalfOpen || s2.State.Running != 1 {
		t.Fatalf("app:3: %+v", s2)
	}
	if sn.Key != "nope" || len(sn.Counts) != 0 || sn.OldestAvailable != nil || sn.State != nil {
		t.Fatalf("nope: %+v", sn)
	}
	if se.Key != "" || len(se.Counts) != 0 || se.State == nil {
		t.Fatalf("empty key: %+v", se)
	}
	if s, err := fx.FlowKeyStats(ctx, nil); s != nil || err != nil {
		t.Fatalf("no keys: %v %v", s, err)
	}
}

func TestFlowLimits(t *testing.T) {
	d := openTest(t)
	ctx := context.Background()
	fx := d.Executor().(keeldriver.FlowExecutor)
	full := &keeltype.FlowLimit{
		Pattern: "app:*", Queue: "q", Rate: 2.5, Burst: 3, MaxRunning: 4,
		BreakerFailures: 5, BreakerRatio: 0.5, BreakerWindow: 90 * time.Second, BreakerMinCalls: 20,
		BreakerCooldown: 1500 * time.Millisecond, BreakerProbes: 2, AutoPauseFailures: 50, Weight: 7,
		Ramp:      []keeltype.RampStep{{After: 0, Rate: 0.5}, {After: 30 * time.Second, Rate: 1}, {After: 2 * time.Minute, Rate: 2.5}},
		UpdatedAt: t0, UpdatedBy: "ops",
	}
	got, err := fx.FlowLimitUpsert(ctx, full)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, full) {
		t.Fatalf("stored:\n got %+v\nwant %+v", got, full)
	}
	var ramp string
	if err := d.r.QueryRowContext(ctx, "SELECT ramp FROM keel_flow_limit WHERE pattern = 'app:*'").Scan(&ramp); err != nil ||
		ramp != `[{"after":0,"rate":0.5},{"after":30000,"rate":1},{"after":120000,"rate":2.5}]` {
		t.Fatalf("ramp column %s %v", ramp, err)
	}

	// Upsert replaces every field; defaults: Weight 1, UpdatedAt now,
	// durations at millisecond precision, no ramp.
	before := time.Now().Add(-time.Second)
	got, err = fx.FlowLimitUpsert(ctx, &keeltype.FlowLimit{Pattern: "app:*", Queue: "q", MaxRunning: 1, BreakerWindow: 1500 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	if got.Weight != 1 || got.Rate != 0 || got.MaxRunning != 1 || got.Ramp != nil || got.UpdatedBy != "" ||
		got.BreakerWindow != time.Millisecond || got.UpdatedAt.Before(before) {
		t.Fatalf("replaced: %+v", got)
	}
	for _, l := range []*keeltype.FlowLimit{{Pattern: "*"}, {Pattern: "app:*"}, {Pattern: "a", Queue: "z"}} {
		if _, err := fx.FlowLimitUpsert(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	list, err := fx.FlowLimitList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, l := range list {
		order = append(order, l.Pattern+"/"+l.Queue)
	}
	if !slices.Equal(order, []string{"*/", "a/z", "app:*/", "app:*/q"}) {
		t.Fatalf("order %q", order)
	}

	for _, bad := range []*keeltype.FlowLimit{
		{Pattern: ""}, {Pattern: "x", BreakerRatio: 2}, {Pattern: "x", Weight: 5000}, {Pattern: "x", Rate: -1},
	} {
		if _, err := fx.FlowLimitUpsert(ctx, bad); !errors.Is(err, keeltype.ErrInvalidArgument) {
			t.Errorf("%+v: %v", bad, err)
		}
	}

	if err := fx.FlowLimitDelete(ctx, "app:*", "q"); err != nil {
		t.Fatal(err)
	}
	if err := fx.FlowLimitDelete(ctx, "app:*", "q"); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if list, _ := fx.FlowLimitList(ctx); len(list) != 3 {
		t.Fatalf("after delete: %d", len(list))
	}
}

func TestJobAgePriorities(t *testing.T) {
	d := openTest(t)
	ctx := context.Background()
	fx := d.Executor().(keeldriver.FlowExecutor)
	mk := func(p int, age time.Duration) *keeldriver.JobInsertParams {
		return &keeldriver.JobInsertParams{Kind: "k", Queue: "q", Priority: p, RunAt: at(-age)}
	}
	jobs := insert(t, d,
		mk(3, 90*time.Second), // old enough for one level now
		mk(1, time.Hour),      // already highest
		mk(4, 30*time.Second), // too young
		mk(4, 10*time.Minute), // old enough for one level per call, up to 3 levels
	)
	running := insert(t, d, &keeldriver.JobInsertParams{Kind: "k", Queue: "q", Priority: 4, FlowKey: "r", RunAt: at(-time.Hour)})
	claimKeys(t, d.Executor(), "q", []string{"r"}, []int{1})
	priorities := func() (p, b []any) {
		t.Helper()
		for _, j := range append(jobs, running...) {
			var prio int
			var base sql.NullInt64
			if err := d.r.QueryRowContext(ctx, "SELECT priority, base_priority FROM keel_job WHERE id = ?", j.ID).Scan(&prio, &base); err != nil {
				t.Fatal(err)
			}
			p = append(p, prio)
			if base.Valid {
				b = append(b, int(base.Int64))
			} else {
				b = append(b, nil)
			}
		}
		return p, b
	}
	age := func(now *time.Time, max int) int {
		t.Helper()
		n, err := fx.JobAgePriorities(ctx, &keeldriver.JobAgeParams{Interval: time.Minute, Max: max, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The running job (priority 4, an hour old) never moves: only available
	// jobs age. Max bounds the batch.
	if n := age(at(0), 1); n != 1 {
		t.Fatalf("max 1: %d", n)
	}
	if n := age(at(0), 0); n != 1 {
		t.Fatalf("rest: %d", n)
	}
	p, b := priorities()
	if !reflect.DeepEqual(p, []any{2, 1, 4, 3, 4}) || !reflect.DeepEqual(b, []any{3, nil, nil, 4, nil}) {
		t.Fatalf("first round: %v %v", p, b)
	}
	// Same instant: a raised job needs twice the interval for the next level.
	// The 10-minute job qualifies (≥ 2 min), the 90 s one does not.
	if n := age(at(0), 0); n != 1 {
		t.Fatalf("second call: %d", n)
	}
	if n := age(at(0), 0); n != 1 {
		t.Fatalf("third call: %d", n)
	}
	if n := age(at(0), 0); n != 0 {
		t.Fatalf("fourth call: %d", n)
	}
	p, b = priorities()
	if !reflect.DeepEqual(p, []any{2, 1, 4, 1, 4}) || !reflect.DeepEqual(b, []any{3, nil, nil, 4, nil}) {
		t.Fatalf("after rounds: %v %v", p, b)
	}
	// 90 s later the first job (now 3 min waiting) gets its second level.
	if n := age(at(90*time.Second), 0); n != 2 {
		// the 30 s job is now 2 minutes old: one level for it too
		t.Fatalf("later: %d", n)
	}
	p, b = priorities()
	if !reflect.DeepEqual(p, []any{1, 1, 3, 1, 4}) || !reflect.DeepEqual(b, []any{3, nil, 4, 4, nil}) {
		t.Fatalf("later: %v %v", p, b)
	}
	// Aged jobs claim and read like any other, highest first.
	got := claim(t, d, "q", "w", 5, nil)
	if !slices.Equal(ids(got), []int64{jobs[0].ID, jobs[1].ID, jobs[3].ID, jobs[2].ID}) {
		t.Fatalf("claim order %v", ids(got))
	}
	if _, err := fx.JobAgePriorities(ctx, &keeldriver.JobAgeParams{}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("no interval: %v", err)
	}
}

func TestFlowMigrationDown(t *testing.T) {
	d := openTest(t)
	ctx := context.Background()
	j := insert(t, d, &keeldriver.JobInsertParams{Kind: "k", Queue: "q", Priority: 4, RunAt: at(-time.Hour)})[0]
	fx := d.Executor().(keeldriver.FlowExecutor)
	if _, err := fx.JobAgePriorities(ctx, &keeldriver.JobAgeParams{Interval: time.Minute, Now: at(0)}); err != nil {
		t.Fatal(err)
	}
	lockKeys(t, d.Executor(), "a")
	down, err := readMigration(d, "002_flow.down.sql")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Executor().Exec(ctx, down); err != nil {
		t.Fatal(err)
	}
	if got := get(t, d, j.ID); got.Priority != 4 {
		t.Fatalf("priority after down: %d", got.Priority)
	}
	for _, name := range []string{"keel_flow_key", "keel_flow_limit"} {
		if ok, _ := d.Executor().TableExists(ctx, name); ok {
			t.Fatalf("%s survived down", name)
		}
	}
	up, err := readMigration(d, "002_flow.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Executor().Exec(ctx, up); err != nil {
		t.Fatalf("up again: %v", err)
	}
}

func readMigration(d *Driver, name string) (string, error) {
	b, err := fs.ReadFile(d.Migrations(), name)
	return string(b), err
}
