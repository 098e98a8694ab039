// Package plantest reads PostgreSQL plans for tests that pin how a
// statement reaches its rows.
//
// The plans worth pinning are the generic ones: a pooled connection
// switches a prepared statement to its generic plan after five executions
// when that plan looks no dearer, and the engine's claim pool forces it.
// A generic plan is chosen on the table's statistics alone, and statistics
// taken at the wrong moment (autovacuum analyzing a table while none of its
// rows is in the state a partial index covers) make that index look empty.
// A statement that addresses rows by primary key and also tests the state
// the index covers can then be planned as a walk of the whole index, which
// is cheap only while the statistics are true. Tests built on this package
// reproduce that moment (rows, ANALYZE, then the rows moved into the
// indexed state) and check the plan.
package plantest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Node is one node of a plan as EXPLAIN (FORMAT JSON) prints it.
type Node = map[string]any

// Querier is what Explain runs EXPLAIN on: a connection, a pool or a
// transaction.
type Querier interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}

// Explain runs an EXPLAIN (FORMAT JSON …) statement and returns the top
// plan node.
func Explain(t testing.TB, q Querier, explain string, args ...any) Node {
	t.Helper()
	var raw []byte
	if err := q.QueryRow(context.Background(), explain, args...).Scan(&raw); err != nil {
		t.Fatalf("explain: %v", err)
	}
	var out []struct {
		Plan Node `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		t.Fatalf("explain output: %v %s", err, raw)
	}
	return out[0].Plan
}

// Generic returns the generic plan of stmt on conn: prepared, then
// explained with every parameter NULL (a generic plan does not look at the
// values). conn must be a Session's, or otherwise set to
// plan_cache_mode = force_generic_plan.
func Generic(t testing.TB, conn *pgx.Conn, stmt string) Node {
	t.Helper()
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "PREPARE plan_probe AS "+stmt); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	defer func() { _, _ = conn.Exec(ctx, "DEALLOCATE plan_probe") }()
	var n int
	if err := conn.QueryRow(ctx, "SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = 'plan_probe'").Scan(&n); err != nil {
		t.Fatalf("parameters: %v", err)
	}
	args := ""
	if n > 0 {
		args = "(" + strings.TrimSuffix(strings.Repeat("NULL, ", n), ", ") + ")"
	}
	return Explain(t, conn, "EXPLAIN (FORMAT JSON) EXECUTE plan_probe"+args)
}

// Nodes flattens a plan tree, the top node first.
func Nodes(n Node) []Node {
	out := []Node{n}
	kids, _ := n["Plans"].([]any)
	for _, k := range kids {
		out = append(out, Nodes(k.(Node))...)
	}
	return out
}

// RequireKeyLookup fails t unless every read of relation in plan is an
// index scan of one of keys (its primary key, or the unique or foreign key
// the statement looks rows up by) with an index condition: one probe per
// row addressed, whatever the statistics say about the table's other
// indexes. ModifyTable nodes (the write itself) are not reads.
func RequireKeyLookup(t testing.TB, plan Node, relation string, keys ...string) {
	t.Helper()
	reads := 0
	for _, n := range Nodes(plan) {
		if n["Relation Name"] != relation || n["Node Type"] == "ModifyTable" {
			continue
		}
		reads++
		cond, _ := n["Index Cond"].(string)
		index, _ := n["Index Name"].(string)
		typ := n["Node Type"]
		if typ != "Index Scan" && typ != "Index Only Scan" || !slices.Contains(keys, index) || cond == "" {
			t.Errorf("%s is read by %v %v (condition %q), want an index scan by key on one of %v",
				relation, typ, index, cond, keys)
		}
	}
	if reads == 0 {
		t.Errorf("no read of %s in the plan", relation)
	}
	if t.Failed() {
		raw, _ := json.MarshalIndent(plan, "", " ")
		t.Logf("plan: %s", raw)
	}
}

// Session acquires a connection of pool for t, runs setup on it in order
// (the rows, ANALYZE, the rows moved into the indexed state) and switches
// it to generic plans for Generic; t's cleanup resets and releases it.
func Session(t testing.TB, pool *pgxpool.Pool, setup ...string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn := c.Conn()
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "RESET plan_cache_mode")
		c.Release()
	})
	for _, q := range slices.Concat(setup, []string{"SET plan_cache_mode = force_generic_plan"}) {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return conn
}
