package keeldrivertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// testQueueListAndStats: queues known from jobs or from keel_queue alone,
// in name order; stats count live jobs only.
func testQueueListAndStats(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	insert(t, ex, job("a"), job("a"), job("a"),
		&keeldriver.JobInsertParams{Kind: "k", Queue: "b", RunAt: at(100 * 24 * 365 * time.Hour)})
	c := claim(t, ex, "a", "w", 2, nil)
	finish(t, ex, done(c[1], keeltype.JobStateCompleted, nil))
	first, err := ex.QueuePause(ctx, &keeldriver.QueuePauseParams{Name: "empty", By: "x", Now: at(0)})
	if err != nil {
		t.Fatal(err)
	}
	// Pausing again keeps the original pause.
	if row, err := ex.QueuePause(ctx, &keeldriver.QueuePauseParams{Name: "empty", By: "y"}); err != nil || row.PausedBy != "x" ||
		row.PausedAt == nil || !row.PausedAt.Equal(*first.PausedAt) {
		t.Fatalf("re-pause: %+v %v", row, err)
	}
	rows, err := ex.QueueList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rows {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"a", "b", "empty"}) || rows[2].PausedAt == nil || rows[0].PausedAt != nil ||
		rows[0].CreatedAt.IsZero() {
		t.Fatalf("list: %q %+v", names, rows)
	}
	stats, err := ex.QueueStats(ctx)
	if err != nil || len(stats) != 3 {
		t.Fatalf("stats: %+v %v", stats, err)
	}
	a, b, empty := stats[0], stats[1], stats[2]
	if a.Queue != "a" || !countsAre(a.Counts, map[keeltype.JobState]int64{keeltype.JobStateAvailable: 1, keeltype.JobStateRunning: 1}) ||
		a.OldestAvailable == nil || !a.OldestAvailable.Equal(t0.Add(-time.Hour)) || a.Paused {
		t.Fatalf("a (the completed job is not counted): %+v", a)
	}
	if b.Queue != "b" || !countsAre(b.Counts, map[keeltype.JobState]int64{keeltype.JobStateScheduled: 1}) || b.OldestAvailable != nil || b.Paused {
		t.Fatalf("b: %+v", b)
	}
	if empty.Queue != "empty" || !empty.Paused || !countsAre(empty.Counts, nil) || empty.OldestAvailable != nil {
		t.Fatalf("empty: %+v", empty)
	}
	if row, err := ex.QueueResume(ctx, "empty"); err != nil || row.Name != "empty" || row.PausedAt != nil {
		t.Fatalf("resume: %+v %v", row, err)
	}
}

// countsAre reports whether counts holds exactly want: a state without
// live jobs is absent, not 0.
func countsAre(counts, want map[keeltype.JobState]int64) bool {
	if len(counts) != len(want) {
		return false
	}
	for st, n := range want {
		if counts[st] != n {
			return false
		}
	}
	return true
}

// testLeaderElection: one holder per name until its lease expires;
// re-election extends it; only the holder can resign.
func testLeaderElection(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	elect := func(id string, now time.Duration) bool {
		t.Helper()
		ok, err := ex.LeaderAttemptElect(ctx, &keeldriver.LeaderElectParams{Name: "main", LeaderID: id, TTL: time.Minute, Now: at(now)})
		if err != nil {
			t.Fatalf("elect %s: %v", id, err)
		}
		return ok
	}
	if _, err := ex.LeaderGet(ctx, "main"); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("get before: %v", err)
	}
	if _, err := ex.LeaderAttemptElect(ctx, &keeldriver.LeaderElectParams{Name: "main", LeaderID: "z", TTL: 0}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("elect with no TTL: %v, want ErrInvalidArgument", err)
	}
	if !elect("a", 0) {
		t.Fatal("a not elected on an empty table")
	}
	if elect("b", 30*time.Second) {
		t.Fatal("b elected while a holds the lease")
	}
	if !elect("a", 50*time.Second) { // re-election extends to 1m50s
		t.Fatal("a not re-elected")
	}
	if elect("b", 100*time.Second) {
		t.Fatal("b took an extended lease")
	}
	row, err := ex.LeaderGet(ctx, "main")
	if err != nil || row.Name != "main" || row.LeaderID != "a" || !row.ElectedAt.Equal(t0) || !row.ExpiresAt.Equal(t0.Add(110*time.Second)) {
		t.Fatalf("leader row: %+v %v", row, err)
	}
	if !elect("b", 111*time.Second) {
		t.Fatal("b did not take the expired lease")
	}
	if row, _ := ex.LeaderGet(ctx, "main"); row == nil || row.LeaderID != "b" || !row.ElectedAt.Equal(t0.Add(111*time.Second)) {
		t.Fatalf("new leader row: %+v", row)
	}
	// Names are independent; the database clock elects too.
	ok, err := ex.LeaderAttemptElect(ctx, &keeldriver.LeaderElectParams{Name: "other", LeaderID: "c", TTL: time.Minute})
	if err != nil || !ok {
		t.Fatalf("elect on another name: %v %v", ok, err)
	}
	if row, err := ex.LeaderGet(ctx, "other"); err != nil || row.LeaderID != "c" || !near(row.ElectedAt) ||
		row.ExpiresAt.Sub(row.ElectedAt) != time.Minute {
		t.Fatalf("leader on the database clock: %+v %v", row, err)
	}
	// Resign by a non-holder does nothing; by the holder frees the name.
	if err := ex.LeaderResign(ctx, &keeldriver.LeaderElectParams{Name: "main", LeaderID: "a"}); err != nil {
		t.Fatal(err)
	}
	if row, _ := ex.LeaderGet(ctx, "main"); row == nil || row.LeaderID != "b" {
		t.Fatalf("non-holder resigned: %+v", row)
	}
	if err := ex.LeaderResign(ctx, &keeldriver.LeaderElectParams{Name: "main", LeaderID: "b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.LeaderGet(ctx, "main"); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("after resign: %v", err)
	}
	if !elect("a", 112*time.Second) {
		t.Fatal("resigned lease not free")
	}
	if row, _ := ex.LeaderGet(ctx, "other"); row == nil || row.LeaderID != "c" {
		t.Fatalf("another name's leader changed: %+v", row)
	}
}

// testLeaderElectionConcurrent: simultaneous candidates elect exactly one.
func testLeaderElectionConcurrent(t *testing.T, e *env) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var winners []string
	for i := range 10 {
		id := fmt.Sprintf("c%d", i)
		wg.Go(func() {
			ok, err := e.ex.LeaderAttemptElect(context.Background(), &keeldriver.LeaderElectParams{Name: "main", LeaderID: id, TTL: time.Minute})
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				winners = append(winners, id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("winners %v, want exactly one", winners)
	}
	if row, err := e.ex.LeaderGet(context.Background(), "main"); err != nil || row.LeaderID != winners[0] {
		t.Fatalf("leader row %+v %v, want %s", row, err, winners[0])
	}
}

// testAudit: newest first, filters (the action filter is a literal prefix),
// paging, defaults.
func testAudit(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	rows := []keeltype.AuditRow{
		{At: t0, Actor: "user:alice", Action: "queue.pause", Target: "queue:a"},
		{At: t0.Add(time.Minute), Actor: "user:bob", Action: "job.cancel", Target: "job:1", Context: json.RawMessage(`{"n": 1}`)},
		{At: t0.Add(2 * time.Minute), Actor: "user:alice", Action: "queue.resume", Target: "queue:a", Reason: "ok"},
		{At: t0.Add(3 * time.Minute), Actor: "user:alice", Action: "queue_x.other", Target: "queue:a"},
		{Actor: "system", Action: "queueXpause", Target: "queue:b"}, // At = database clock
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
		t.Helper()
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
	for _, c := range []struct {
		name string
		got  []int64
		want []int64
	}{
		{"all", list(keeldriver.AuditListParams{}), []int64{ids[4], ids[3], ids[2], ids[1], ids[0]}},
		{"prefix", list(keeldriver.AuditListParams{Action: "queue."}), []int64{ids[2], ids[0]}},
		{"prefix with wildcard", list(keeldriver.AuditListParams{Action: "queue_"}), []int64{ids[3]}},
		{"actor", list(keeldriver.AuditListParams{Actor: "user:bob"}), []int64{ids[1]}},
		{"target before", list(keeldriver.AuditListParams{Target: "queue:a", BeforeID: ids[2]}), []int64{ids[0]}},
		{"window", list(keeldriver.AuditListParams{Since: at(time.Minute), Until: at(time.Minute)}), []int64{ids[1]}},
		{"since", list(keeldriver.AuditListParams{Since: at(2 * time.Minute), Until: at(time.Hour)}), []int64{ids[3], ids[2]}},
		{"limit", list(keeldriver.AuditListParams{Limit: 1}), []int64{ids[4]}},
		{"page", list(keeldriver.AuditListParams{BeforeID: ids[2], Limit: 1}), []int64{ids[1]}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: got %v want %v", c.name, c.got, c.want)
		}
	}
	got, err := ex.AuditList(ctx, &keeldriver.AuditListParams{Actor: "user:bob"})
	if err != nil || len(got) != 1 || !sameJSON(got[0].Context, []byte(`{"n":1}`)) || !got[0].At.Equal(t0.Add(time.Minute)) ||
		got[0].Target != "job:1" || got[0].Action != "job.cancel" {
		t.Fatalf("row: %+v %v", got, err)
	}
	got, _ = ex.AuditList(ctx, &keeldriver.AuditListParams{Action: "queue.resume"})
	if len(got) != 1 || got[0].Reason != "ok" || string(got[0].Context) != "{}" {
		t.Fatalf("defaults: %+v", got)
	}
	got, _ = ex.AuditList(ctx, &keeldriver.AuditListParams{Actor: "system"})
	if len(got) != 1 || !near(got[0].At) || got[0].At.Location() != time.UTC {
		t.Fatalf("at from the database clock: %+v", got)
	}
}

// testMigrations: the catalogue the migrator needs, and the embedded files.
func testMigrations(t *testing.T, e *env) {
	ctx := context.Background()
	ex := e.ex
	for _, name := range []string{"keel_job", "keel_queue", "keel_leader", "keel_audit", "keel_migration",
		"keel_flow_key", "keel_flow_limit", "keel_batch"} {
		if ok, err := ex.TableExists(ctx, name); err != nil || !ok {
			t.Fatalf("table %s: %v %v", name, ok, err)
		}
	}
	if ok, err := ex.TableExists(ctx, "nope"); err != nil || ok {
		t.Fatalf("nope exists: %v %v", ok, err)
	}
	mine := func() []*keeldriver.MigrationRow {
		t.Helper()
		all, err := ex.MigrationApplied(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []*keeldriver.MigrationRow
		for _, r := range all {
			if r.Line == "conformance" {
				out = append(out, r)
			}
		}
		return out
	}
	if err := ex.MigrationRecord(ctx, &keeldriver.MigrationRow{Line: "conformance", Version: 2, Name: "second", AppliedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := ex.MigrationRecord(ctx, &keeldriver.MigrationRow{Line: "conformance", Version: 1, Name: "first"}); err != nil {
		t.Fatal(err)
	}
	got := mine()
	if len(got) != 2 {
		t.Fatalf("applied: %+v", got)
	}
	slices.SortFunc(got, func(a, b *keeldriver.MigrationRow) int { return a.Version - b.Version })
	if got[0].Name != "first" || !near(got[0].AppliedAt) || got[1].Name != "second" || !got[1].AppliedAt.Equal(t0) {
		t.Fatalf("applied: %+v %+v", got[0], got[1])
	}
	if err := ex.MigrationForget(ctx, "conformance", 2); err != nil {
		t.Fatal(err)
	}
	if got := mine(); len(got) != 1 || got[0].Version != 1 {
		t.Fatalf("after forget: %+v", got)
	}
	// Without the table (a database never migrated): empty, not an error.
	if err := ex.Exec(ctx, "DROP TABLE keel_migration"); err != nil {
		t.Fatal(err)
	}
	applied, err := ex.MigrationApplied(ctx)
	if err != nil || len(applied) != 0 {
		t.Fatalf("applied without the table: %v %v", applied, err)
	}

	// The embedded files: NNN_name.up.sql with a matching .down.sql,
	// starting at 001.
	files, err := fs.Glob(e.d.Migrations(), "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migration files: %v %v", files, err)
	}
	named := regexp.MustCompile(`^\d{3}_[a-z0-9_]+\.(up|down)\.sql$`)
	for _, f := range files {
		if !named.MatchString(f) {
			t.Errorf("migration file %q is not NNN_name.up.sql / .down.sql", f)
		}
		if up, ok := strings.CutSuffix(f, ".up.sql"); ok && !slices.Contains(files, up+".down.sql") {
			t.Errorf("%s has no .down.sql", f)
		}
	}
	if !slices.Contains(files, "001_engine.up.sql") {
		t.Errorf("no 001_engine.up.sql in %q", files)
	}
}

// testClose: a closed driver refuses work with ErrClosed; Close is
// idempotent.
func testClose(t *testing.T, e *env) {
	ctx := context.Background()
	if err := e.d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ex.JobGet(ctx, 1); !errors.Is(err, keeldriver.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if _, err := e.d.Executor().JobInsertMany(ctx, []*keeldriver.JobInsertParams{job("q")}); !errors.Is(err, keeldriver.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
	if err := e.d.Notify(ctx, "jobs", "x"); !errors.Is(err, keeldriver.ErrClosed) {
		t.Fatalf("notify after close: %v", err)
	}
	if err := e.d.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}
