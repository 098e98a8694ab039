package keelpgx

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel/internal/plantest"
	"github.com/keelwork/keel/keeldriver"
)

func keyed(key string, priority int) *keeldriver.JobInsertParams {
	p := job("flow")
	p.FlowKey = key
	p.Priority = priority
	return p
}

func availableKeys(t *testing.T, ex keeldriver.Executor, queue, after string, limit int) []string {
	t.Helper()
	keys, err := ex.FlowKeysAvailable(context.Background(), &keeldriver.FlowKeysAvailableParams{Queue: queue, After: after, Limit: limit})
	if err != nil {
		t.Fatalf("FlowKeysAvailable(%q, %d): %v", after, limit, err)
	}
	return keys
}

// explainJSON runs EXPLAIN (FORMAT JSON, opts) of query with args and
// returns the top plan node.
func explainJSON(t *testing.T, d *Driver, opts, query string, args ...any) map[string]any {
	t.Helper()
	return plantest.Explain(t, d.pool, "EXPLAIN (FORMAT JSON"+opts+") "+query, args...)
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
	nodes := plantest.Nodes(plan)
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
	if got := availableKeys(t, ex, "default", "k1", 10); !slices.Equal(got, []string{"", "k2", "k3", "k1"}) {
		t.Errorf("keys: %q", got)
	}

	// JobClaimKeys: no sort (the index gives the order), no scan of the
	// table, every keel_job read of the laterals is an index condition on
	// queue and flow_key.
	plan = explainJSON(t, d, "", sqlJobClaimKeys, []string{"k1", "", "k3"}, []int32{2, 2, 2}, "default", "w",
		int64(60e6), nil)
	var lateral int
	for _, n := range plantest.Nodes(plan) {
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
	jobs, err := ex.JobClaimKeys(ctx, &keeldriver.JobClaimKeysParams{Queue: "default", Owner: "w",
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

// TestFlowKeysLockSkipLocked: PostgreSQL locks key rows, so a claimer
// with SkipLocked skips the rows another transaction holds (even rows that
// transaction created and has not committed) and gets the rest at once.
// SQLite's one writer serializes the transactions instead; the waiting
// behaviour both share is in the conformance suite.
func TestFlowKeysLockSkipLocked(t *testing.T) {
	d := newTestDriver(t)
	ctx := context.Background()
	ex := d.Executor()
	insert(t, ex, keyed("a", 1), keyed("a", 1), keyed("b", 1))
	if _, err := ex.JobClaimKeys(ctx, &keeldriver.JobClaimKeysParams{Queue: "default", Owner: "w",
		LeaseDuration: time.Minute, Keys: []string{"a"}, Ns: []int{1}}); err != nil {
		t.Fatal(err)
	}
	tx1, err := ex.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(ctx)
	rows, err := tx1.FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{Keys: []string{"b", "a"}, SkipLocked: true})
	if err != nil || len(rows) != 2 {
		t.Fatalf("first locker: %+v %v", rows, err)
	}

	// A plain INSERT ... ON CONFLICT would wait for tx1's uncommitted rows.
	tx2, err := ex.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback(ctx)
	quick, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err = tx2.FlowKeysLock(quick, &keeldriver.FlowKeysLockParams{Keys: []string{"a", "b", "c"}, SkipLocked: true})
	if err != nil || len(rows) != 1 || rows[0].Key != "c" || rows[0].Running != 0 {
		t.Fatalf("second locker: %+v %v", rows, err)
	}
	if err := tx2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err = ex.FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{Keys: []string{"a", "b", "c"}, SkipLocked: true})
	if err != nil || len(rows) != 3 || rows[0].Running != 1 {
		t.Fatalf("after both committed: %+v %v", rows, err)
	}
}

// TestFlowKeysLockSchemasApart: two engines in two schemas of one database
// creating the same key at once do not see each other. Advisory locks
// belong to the database, so a creation lock not namespaced by schema made
// a SkipLocked locker in one schema skip a key only the other schema was
// creating (the conformance suite's FlowKeysSaveAndRead got no row when a
// parallel test created the same key elsewhere).
func TestFlowKeysLockSchemasApart(t *testing.T) {
	ctx := context.Background()
	one, other := newTestDriver(t), newTestDriver(t)
	tx1, err := one.Executor().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(ctx)
	if rows, err := tx1.FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{Keys: []string{"app:1"}, SkipLocked: true}); err != nil || len(rows) != 1 {
		t.Fatalf("first schema: %+v %v", rows, err)
	}
	// tx1 holds its creation of "app:1" open.
	tx2, err := other.Executor().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback(ctx)
	quick, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := tx2.FlowKeysLock(quick, &keeldriver.FlowKeysLockParams{Keys: []string{"app:1"}, SkipLocked: true})
	if err != nil || len(rows) != 1 || rows[0].Key != "app:1" {
		t.Fatalf("the other schema's locker got %+v %v, want its own new row", rows, err)
	}
}

// TestKeyedReadsOnLargeHistory: migration 9 took running jobs out of
// keel_job_flow_key_idx (a keyed claim no longer writes an entry there) and
// merged the two running-job indexes into keel_job_running_idx. With
// 200,000 finished keyed jobs in the table, a key's page, its counts by
// state, its running count and lease rescue still read only index ranges
// (a handful of buffers, no scan of the table), and a key's page and counts
// include its running jobs.
func TestKeyedReadsOnLargeHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("large history")
	}
	d := newTestDriver(t)
	ctx := context.Background()
	ex := d.Executor()
	err := ex.Exec(ctx, `
		INSERT INTO keel_job (kind, queue, flow_key, state, finalized_at)
		SELECT 'old', 'default', 'h' || (g % 1000), 'completed', now() FROM generate_series(1, 200000) g;
		INSERT INTO keel_job (kind, queue, flow_key) SELECT 'new', 'default', 'k' FROM generate_series(1, 6) g;
		ANALYZE keel_job`)
	if err != nil {
		t.Fatal(err)
	}
	running, err := ex.JobClaimKeys(ctx, &keeldriver.JobClaimKeysParams{Queue: "default", Owner: "w",
		LeaseDuration: time.Minute, Keys: []string{"k"}, Ns: []int{2}})
	if err != nil || len(running) != 2 {
		t.Fatalf("claim: %d %v", len(running), err)
	}

	indexOnly := func(name string, plan map[string]any, maxBuffers float64) {
		t.Helper()
		for _, n := range plantest.Nodes(plan) {
			if n["Node Type"] == "Seq Scan" && n["Relation Name"] == "keel_job" {
				t.Errorf("%s scans keel_job", name)
			}
			switch idx, _ := n["Index Name"].(string); idx {
			case "", "keel_job_flow_key_idx", "keel_job_running_idx", "keel_job_pkey":
			default:
				t.Errorf("%s reads keel_job by %v %v", name, n["Node Type"], idx)
			}
		}
		blocks := plan["Shared Hit Blocks"].(float64) + plan["Shared Read Blocks"].(float64)
		t.Logf("%s: %v buffers", name, blocks)
		if blocks > maxBuffers {
			t.Errorf("%s touched %v buffers over 200,000 finished jobs; an index range needs a few", name, blocks)
		}
	}
	null := func() any { return nil }
	for _, q := range []struct{ name, sql string }{{"JobListKeyAsc", sqlJobListKeyAsc}, {"JobListKeyDesc", sqlJobListKeyDesc}} {
		indexOnly(q.name, explainJSON(t, d, ", ANALYZE, BUFFERS", q.sql, null(), null(), null(), "k", null(), null(), null(), 3), 60)
	}
	// h7's 200 finished jobs lie on about as many heap pages.
	indexOnly("FlowKeyStats", explainJSON(t, d, ", ANALYZE, BUFFERS", sqlFlowKeyStats, []string{"k", "h7"}), 400)
	// Rescue as of an hour ago: the plan runs, nothing expired then.
	indexOnly("JobRescue", explainJSON(t, d, ", ANALYZE, BUFFERS", sqlJobRescue, 100, time.Now().Add(-time.Hour)), 60)
	// The running count of FlowKeysLock*, FlowKeysGet and FlowKeyList.
	indexOnly("running count", explainJSON(t, d, ", ANALYZE, BUFFERS", "SELECT count(*) FROM keel_job j WHERE j.flow_key = $1 AND j.state = 'running'", "k"), 60)

	page, err := ex.JobList(ctx, &keeldriver.JobListParams{FlowKey: "k", Limit: 3})
	if err != nil || len(page) != 3 || page[0].ID != running[0].ID || page[1].ID != running[1].ID || page[2].State != "available" {
		t.Fatalf("key page: %v %v", page, err)
	}
	stats, err := ex.FlowKeyStats(ctx, []string{"k", "h7"})
	if err != nil || len(stats) != 2 || stats[0].Counts["running"] != 2 || stats[0].Counts["available"] != 4 || stats[1].Counts["completed"] != 200 {
		t.Fatalf("stats: %+v %v", stats, err)
	}
}
