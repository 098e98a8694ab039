package keelsqlite

import (
	"context"
	"database/sql"
	"io/fs"
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

// TestFlowQueryPlansSmallTable: on a small table without statistics the
// key listing and the claim still walk keel_job_key_claim_idx (INDEXED BY),
// never scan keel_job. The results are in the conformance suite.
func TestFlowQueryPlansSmallTable(t *testing.T) {
	d := openTest(t)
	insert(t, d, keyed("q", "a", 2), keyed("q", "b", 1), keyed("q", "", 2))
	assertNoJobScan(t, queryPlan(t, d, "FlowKeysAvailable",
		sql.Named("queue", "q"), sql.Named("after", "b"), sql.Named("limit", 10)), "keel_job_key_claim_idx", "j")
	assertNoJobScan(t, queryPlan(t, d, "JobClaimKeys",
		sql.Named("wanted", `[{"key":"a","n":3},{"key":"","n":2}]`), sql.Named("queue", "q"),
		sql.Named("owner", "w"), sql.Named("lease_expires_at", 1), sql.Named("now", 0)), "keel_job_key_claim_idx", "j", "c")
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
