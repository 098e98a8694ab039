package keeldrivertest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

func flowKeyNames(rows []*keeltype.FlowKeyRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key
	}
	return out
}

// lockKeys locks keys with SkipLocked at t0.
func lockKeys(t *testing.T, ex keeldriver.Executor, keys ...string) []*keeltype.FlowKeyRow {
	t.Helper()
	rows, err := ex.FlowKeysLock(context.Background(), &keeldriver.FlowKeysLockParams{Keys: keys, SkipLocked: true, Now: at(0)})
	if err != nil {
		t.Fatalf("locking %q: %v", keys, err)
	}
	return rows
}

// saveKeys saves rows at t0 + 1s.
func saveKeys(t *testing.T, ex keeldriver.Executor, rows ...*keeltype.FlowKeyRow) {
	t.Helper()
	if err := ex.FlowKeysSave(context.Background(), rows, at(time.Second)); err != nil {
		t.Fatalf("saving %q: %v", flowKeyNames(rows), err)
	}
}

// testFlowKeysLock: rows are created as needed and come back once per key
// in key order with the running count; a second locker without SkipLocked
// waits for the holder's commit and sees what it saved; a rolled-back
// creation leaves nothing.
func testFlowKeysLock(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	insert(t, ex, keyed("q", "a", 2), keyed("q", "a", 2), keyed("q", "a", 2), keyed("q", "b", 2), keyed("q", "", 2))
	claimKeys(t, ex, "q", []string{"a", ""}, []int{2, 1})

	tx, err := ex.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows := lockKeys(t, tx, "c", "a", "b", "a")
	if got := flowKeyNames(rows); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("keys %q", got)
	}
	for i, want := range []int{2, 0, 0} {
		r := rows[i]
		if r.Running != want || r.BreakerState != keeltype.BreakerClosed || string(r.PauseContext) != "{}" ||
			!r.UpdatedAt.Equal(t0) || r.PausedAt != nil || r.Tokens != 0 || r.TokensAt != nil || r.ConsecutiveFailures != 0 {
			t.Fatalf("new row %d: %+v", i, r)
		}
	}
	rows[0].ConsecutiveFailures = 7
	saveKeys(t, tx, rows...)

	// Without SkipLocked another locker waits for the transaction.
	waited := make(chan []*keeltype.FlowKeyRow, 1)
	go func() {
		rows, err := ex.FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{Keys: []string{"a", "c"}})
		if err != nil {
			t.Error(err)
		}
		waited <- rows
	}()
	select {
	case rows := <-waited:
		t.Fatalf("a waiting locker returned while the keys were held: %+v", rows)
	case <-time.After(200 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case rows := <-waited:
		if len(rows) != 2 || rows[0].Key != "a" || rows[0].ConsecutiveFailures != 7 || rows[0].Running != 2 || rows[1].Key != "c" {
			t.Fatalf("the waiting locker got %+v", rows)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting locker never returned")
	}

	// Locking existing rows changes nothing in them.
	again, err := ex.FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{Keys: []string{"a"}, Now: at(time.Hour)})
	if err != nil || len(again) != 1 || !again[0].UpdatedAt.Equal(t0.Add(time.Second)) || again[0].Running != 2 {
		t.Fatalf("again: %+v %v", again, err)
	}
	// "" may have a state row; no job is counted for it.
	if r := lockKeys(t, ex, ""); len(r) != 1 || r[0].Key != "" || r[0].Running != 0 {
		t.Fatalf("empty key: %+v", r)
	}
	if r, err := ex.FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{}); err != nil || len(r) != 0 {
		t.Fatalf("no keys: %v %v", r, err)
	}
	if _, err := ex.FlowKeyGet(ctx, "c"); err != nil {
		t.Fatalf("row created in the transaction: %v", err)
	}
	rb, err := ex.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lockKeys(t, rb, "z")
	if err := rb.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.FlowKeyGet(ctx, "z"); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("row created in a rolled-back transaction: %v", err)
	}
}

// testFlowKeysSave: every state field round-trips (Running is not stored),
// rows without a state row are ignored, clearing works, the database clock
// stamps a nil now, and a breaker state outside the set is refused.
func testFlowKeysSave(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	if _, err := ex.FlowKeyGet(ctx, "app:1"); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	tx, err := ex.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows := lockKeys(t, tx, "app:1", "app:2")
	// Sub-second times with microseconds: the stored precision.
	ts := func(s int) *time.Time { return ptr(time.Date(2030, 1, 1, 0, 0, s, 123000, time.UTC)) }
	full := rows[0]
	*full = keeltype.FlowKeyRow{
		Key: "app:1", Tokens: 2.5, TokensAt: ts(1), PausedAt: ts(2), PausedBy: "user:bob",
		PauseReason: "auto", PauseContext: json.RawMessage(`{"failures": 5}`), BreakerState: keeltype.BreakerHalfOpen,
		BreakerOpenedAt: ts(3), BreakerProbesLeft: 2, ConsecutiveFailures: 5, WindowStart: ts(4),
		WindowCalls: 10, WindowFailures: 6, RampStartedAt: ts(5), LastError: "boom", LastFailureClass: "error",
		LastFailureAt: ts(6), LastSuccessAt: ts(7),
		Running: 99, // not stored
	}
	saved := *ts(9)
	if err := tx.FlowKeysSave(ctx, append(rows, &keeltype.FlowKeyRow{Key: "ghost"}), &saved); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.FlowKeyGet(ctx, "ghost"); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("a row without a state row was created: %v", err)
	}
	got, err := ex.FlowKeyGet(ctx, "app:1")
	if err != nil {
		t.Fatal(err)
	}
	want := *full
	want.Running = 0
	want.UpdatedAt = saved
	if !reflect.DeepEqual(canonicalKey(got), canonicalKey(&want)) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, &want)
	}
	if other, err := ex.FlowKeyGet(ctx, "app:2"); err != nil || other.BreakerState != keeltype.BreakerClosed || !other.UpdatedAt.Equal(saved) {
		t.Fatalf("untouched row saved: %+v %v", other, err)
	}

	// The database clock.
	got.Tokens = 1
	if err := ex.FlowKeysSave(ctx, []*keeltype.FlowKeyRow{got}, nil); err != nil {
		t.Fatal(err)
	}
	if again, err := ex.FlowKeyGet(ctx, "app:1"); err != nil || again.Tokens != 1 || !near(again.UpdatedAt) {
		t.Fatalf("saved with the database clock: %+v %v", again, err)
	}
	// Clearing: NULL times, a closed breaker by default, {} context.
	saveKeys(t, ex, &keeltype.FlowKeyRow{Key: "app:1"})
	got, err = ex.FlowKeyGet(ctx, "app:1")
	if err != nil || got.PausedAt != nil || got.TokensAt != nil || got.BreakerState != keeltype.BreakerClosed ||
		string(got.PauseContext) != "{}" || got.LastError != "" || got.Tokens != 0 || got.ConsecutiveFailures != 0 {
		t.Fatalf("cleared: %+v %v", got, err)
	}
	err = ex.FlowKeysSave(ctx, []*keeltype.FlowKeyRow{{Key: "app:1", BreakerState: "ajar"}}, nil)
	if !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("bad breaker state: %v", err)
	}
}

// canonicalKey is r with its JSON in canonical form.
func canonicalKey(r *keeltype.FlowKeyRow) *keeltype.FlowKeyRow {
	c := *r
	c.PauseContext = canonical(c.PauseContext)
	return &c
}

func listKeys(t *testing.T, ex keeldriver.Executor, p keeldriver.FlowKeyListParams) []*keeltype.FlowKeyRow {
	t.Helper()
	rows, err := ex.FlowKeyList(context.Background(), &p)
	if err != nil {
		t.Fatalf("FlowKeyList(%+v): %v", p, err)
	}
	return rows
}

// testFlowKeyList: key order, After paging, OnlyPaused / OnlyTripped,
// Running filled in.
func testFlowKeyList(t *testing.T, e *env) {
	ex := e.ex
	rows := lockKeys(t, ex, "app:1", "app:2", "app:3", "b%1", "", "app_x")
	if got := flowKeyNames(rows); !slices.Equal(got, []string{"", "app:1", "app:2", "app:3", "app_x", "b%1"}) {
		t.Fatalf("locked %q", got)
	}
	rows[1].PausedAt = at(0)
	rows[2].BreakerState = keeltype.BreakerOpen
	rows[3].BreakerState = keeltype.BreakerHalfOpen
	rows[5].PausedAt = at(0)
	saveKeys(t, ex, rows...)
	// app:3 is half-open, so claimable.
	insert(t, ex, keyed("q", "app:3", 2), keyed("q", "app:3", 2), keyed("q", "app:3", 3))
	if got := claimKeys(t, ex, "q", []string{"app:3"}, []int{1}); len(got) != 1 {
		t.Fatalf("claimed %d", len(got))
	}
	for _, c := range []struct {
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
	} {
		got := listKeys(t, ex, c.p)
		if names := flowKeyNames(got); !slices.Equal(names, c.want) {
			t.Errorf("%+v: got %q want %q", c.p, names, c.want)
		}
		for _, r := range got {
			if want := map[string]int{"app:3": 1}[r.Key]; r.Running != want {
				t.Errorf("running of %q: %d, want %d", r.Key, r.Running, want)
			}
		}
	}
}

// testFlowKeyListPatterns: a prefix is literal (% and _ are not wildcards)
// and keys sort bytewise.
func testFlowKeyListPatterns(t *testing.T, e *env) {
	ex := e.ex
	rows := lockKeys(t, ex, "app:1", "app:2", "app%3", "app_4", "ap", "zz")
	byKey := map[string]*keeltype.FlowKeyRow{}
	for _, r := range rows {
		byKey[r.Key] = r
	}
	byKey["app:1"].PausedAt = at(0)
	byKey["app:1"].BreakerState = keeltype.BreakerHalfOpen
	byKey["app%3"].BreakerState = keeltype.BreakerOpen
	byKey["zz"].PausedAt = at(0)
	saveKeys(t, ex, rows...)
	for _, c := range []struct {
		p    keeldriver.FlowKeyListParams
		want []string
	}{
		{keeldriver.FlowKeyListParams{}, []string{"ap", "app%3", "app:1", "app:2", "app_4", "zz"}},
		{keeldriver.FlowKeyListParams{Limit: 2}, []string{"ap", "app%3"}},
		{keeldriver.FlowKeyListParams{After: "app%3", Limit: 2}, []string{"app:1", "app:2"}},
		{keeldriver.FlowKeyListParams{Prefix: "app"}, []string{"app%3", "app:1", "app:2", "app_4"}},
		{keeldriver.FlowKeyListParams{Prefix: "app:", After: "app:1"}, []string{"app:2"}},
		{keeldriver.FlowKeyListParams{Prefix: "app%"}, []string{"app%3"}},
		{keeldriver.FlowKeyListParams{Prefix: "app_"}, []string{"app_4"}},
		{keeldriver.FlowKeyListParams{OnlyPaused: true}, []string{"app:1", "zz"}},
		{keeldriver.FlowKeyListParams{OnlyTripped: true}, []string{"app%3", "app:1"}},
		{keeldriver.FlowKeyListParams{OnlyPaused: true, OnlyTripped: true}, []string{"app:1"}},
	} {
		if got := flowKeyNames(listKeys(t, ex, c.p)); !slices.Equal(got, c.want) {
			t.Errorf("%+v: got %q want %q", c.p, got, c.want)
		}
	}
}

// testFlowKeyStats: per requested key (duplicates once, input order) the
// live counts, the oldest available run_at and the state row if any.
func testFlowKeyStats(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	rows := lockKeys(t, ex, "app:1", "app:3", "")
	rows[1].PausedBy, rows[1].PausedAt = "user:bob", at(0) // app:1
	rows[2].BreakerState = keeltype.BreakerHalfOpen        // app:3
	saveKeys(t, ex, rows...)

	old := insert(t, ex, &keeldriver.JobInsertParams{Kind: "k", Queue: "q", FlowKey: "app:9", RunAt: at(-2 * time.Hour)})[0]
	insert(t, ex, keyed("q", "app:1", 2), keyed("q", "app:1", 2), keyed("q", "app:9", 2), keyed("q", "", 2),
		keyed("q", "app:3", 2), keyed("q", "app:3", 2), keyed("q", "app:3", 3))
	if got := claimKeys(t, ex, "q", []string{"app:3"}, []int{1}); len(got) != 1 {
		t.Fatalf("claimed %d", len(got))
	}
	done1 := claimKeys(t, ex, "q", []string{"app:9"}, []int{1})
	finish(t, ex, done(done1[0], keeltype.JobStateCompleted, nil))

	stats, err := ex.FlowKeyStats(ctx, []string{"app:9", "app:3", "nope", "app:3", "", "app:1"})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, s := range stats {
		keys = append(keys, s.Key)
	}
	if !slices.Equal(keys, []string{"app:9", "app:3", "nope", "", "app:1"}) {
		t.Fatalf("stats keys: %q", keys)
	}
	s9, s3, sn, se, s1 := stats[0], stats[1], stats[2], stats[3], stats[4]
	// app:9's oldest job was claimed and completed: the oldest available
	// is the other one. Counts are by state, final states included.
	if len(s9.Counts) != 2 || s9.Counts[keeltype.JobStateAvailable] != 1 || s9.Counts[keeltype.JobStateCompleted] != 1 ||
		s9.OldestAvailable == nil ||
		!s9.OldestAvailable.Equal(t0.Add(-time.Hour)) || s9.State != nil || done1[0].ID != old.ID {
		t.Fatalf("app:9: %+v", s9)
	}
	if len(s3.Counts) != 2 || s3.Counts[keeltype.JobStateAvailable] != 2 || s3.Counts[keeltype.JobStateRunning] != 1 ||
		s3.OldestAvailable == nil || s3.State == nil || s3.State.BreakerState != keeltype.BreakerHalfOpen || s3.State.Running != 1 {
		t.Fatalf("app:3: %+v %+v", s3, s3.State)
	}
	if len(sn.Counts) != 0 || sn.OldestAvailable != nil || sn.State != nil {
		t.Fatalf("nope: %+v", sn)
	}
	if len(se.Counts) != 0 || se.State == nil || se.State.Key != "" {
		t.Fatalf("empty key (its jobs are not counted): %+v", se)
	}
	if s1.State == nil || s1.State.PausedBy != "user:bob" || s1.Counts[keeltype.JobStateAvailable] != 2 {
		t.Fatalf("app:1: %+v", s1)
	}
	// app:1 is paused (JobClaimKeys skips it); the plain claim takes its
	// first job, the first available in (priority, id) order.
	if got := claim(t, ex, "q", "w", 1, nil); len(got) != 1 || got[0].FlowKey != "app:1" {
		t.Fatalf("claim: %+v", got)
	}
	stats, err = ex.FlowKeyStats(ctx, []string{"app:1"})
	if err != nil || len(stats) != 1 {
		t.Fatalf("stats: %v %v", stats, err)
	}
	if s := stats[0]; s.Counts[keeltype.JobStateRunning] != 1 || s.Counts[keeltype.JobStateAvailable] != 1 || s.State.Running != 1 {
		t.Fatalf("after claim: %+v %+v", s, s.State)
	}
	if s, err := ex.FlowKeyStats(ctx, nil); err != nil || len(s) != 0 {
		t.Fatalf("no keys: %v %v", s, err)
	}
}
