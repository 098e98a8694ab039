package keelpgx

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/keelwork/keel/internal/plantest"
)

// TestPlansAfterAnalyze checks the plans the engine ends up using (generic
// plans: a pooled connection switches to one after five executions of a
// statement) on a table analyzed while no job was running, as autovacuum
// does after a large insert or at an idle moment, with no job waiting or
// held for an operator either. Every statement that addresses jobs by id
// must read them through the primary key. Before, such statistics made the
// running-job index look empty: the finish and heartbeat statements scanned it whole and joined their batch
// to it by a nested loop without an index (every running job compared with
// every finished one), and the claims joined the picked jobs to the table
// by a merge join over the whole primary key; a drain of 100,000 jobs fell
// from 34,700 to 592 jobs/s.
func TestPlansAfterAnalyze(t *testing.T) {
	d := newTestDriver(t)
	ctx := context.Background()
	err := d.Executor().Exec(ctx, `
		INSERT INTO keel_job (kind, queue, flow_key)
		SELECT 'plan', 'default', CASE WHEN g % 10 = 0 THEN NULL ELSE 'k' || (g % 100) END
		FROM generate_series(1, 30000) g;
		INSERT INTO keel_job (kind, queue, state, attempt, fence, attempted_at, finalized_at)
		SELECT 'plan', 'default', 'completed', 1, 1, now(), now() FROM generate_series(1, 30000) g;
		INSERT INTO keel_job (kind, queue, state, run_at)
		SELECT 'plan', 'default', 'scheduled', now() - interval '1 hour' FROM generate_series(1, 30000) g;
		ANALYZE keel_job`)
	if err != nil {
		t.Fatal(err)
	}
	conn := plantest.Session(t, d.pool)

	for _, s := range []struct{ name, sql string }{
		{"JobFinishMany", sqlJobFinishMany},
		{"JobHeartbeat", sqlJobHeartbeat},
		{"JobClaimKeys", sqlJobClaimKeys},
		{"JobClaim", sqlJobClaim},
		{"JobPromote", sqlJobPromote},
		{"JobRescue", sqlJobRescue},
		{"JobAgePriorities", sqlJobAgePriorities},
	} {
		t.Run(s.name, func(t *testing.T) {
			plan := plantest.Generic(t, conn, s.sql)
			target := 0
			for _, n := range plantest.Nodes(plan) {
				if n["Relation Name"] != "keel_job" || n["Alias"] != "j" || n["Node Type"] == "ModifyTable" {
					continue
				}
				target++
				cond, _ := n["Index Cond"].(string)
				if n["Node Type"] != "Index Scan" || n["Index Name"] != "keel_job_pkey" || !strings.Contains(cond, "id =") {
					t.Errorf("the jobs it updates are read by %v %v (condition %q), want an Index Scan on keel_job_pkey by id",
						n["Node Type"], n["Index Name"], cond)
				}
			}
			if target == 0 {
				t.Errorf("no read of keel_job j in the plan")
			}
			for _, n := range plantest.Nodes(plan) {
				if n["Node Type"] == "Merge Join" || n["Node Type"] == "Hash Join" {
					t.Errorf("plan joins by %v; the jobs should be looked up by id", n["Node Type"])
				}
			}
			if t.Failed() {
				raw, _ := json.MarshalIndent(plan, "", " ")
				t.Logf("plan: %s", raw)
			}
		})
	}
	// Statements that name jobs by id read nothing but those rows. The
	// wake by ids was one statement with optional filters ("$1 IS NULL OR
	// id = ANY($1)"), whose generic plan walked keel_job_wait_key_idx, every
	// waiting job's entry, for the few it names: a receipt woke its job in
	// time proportional to every job still awaiting one.
	for _, s := range []struct{ name, sql string }{
		{"JobWakeIDs", sqlJobWakeIDs},
		{"JobCancel", sqlJobCancel},
		{"JobRetry", sqlJobRetry},
		{"JobDelete", sqlJobDelete},
		{"JobCurrentFences", sqlJobCurrentFences},
		{"JobGet", sqlJobGet},
	} {
		t.Run(s.name, func(t *testing.T) {
			plantest.RequireKeyLookup(t, plantest.Generic(t, conn, s.sql), "keel_job", "keel_job_pkey")
		})
	}
	// The wake by flow key reads the key's waiting jobs only, not the
	// key's jobs in every state (keel_job_flow_key_idx).
	t.Run("JobWakeFlow", func(t *testing.T) {
		plantest.RequireKeyLookup(t, plantest.Generic(t, conn, sqlJobWakeFlow), "keel_job", "keel_job_wait_key_idx")
	})
}
