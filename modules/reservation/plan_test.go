package reservation

import (
	"context"
	"strings"
	"testing"

	"github.com/keelwork/keel/keelpgx"
)

// TestExpireManyPlanAfterAnalyze: the hold expiry addresses the holds it
// picked by id. Analyzed while no hold was pending (as autovacuum may), the
// planner estimated rsv_reservation_hold_idx at one row; a statement whose
// state test proves that index's predicate was planned as a scan of every
// expired hold with the batch joined by a nested loop without an index
// (every expired hold compared with every id of the batch). It must look
// the holds up by primary key.
func TestExpireManyPlanAfterAnalyze(t *testing.T) {
	e := newPGEnv(t)
	m := e.module(t)
	ctx := context.Background()
	pool := e.driver.(*keelpgx.Driver).Pool()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, q := range []string{
		`INSERT INTO rsv_category (id, name_zh, name_en, updated_at, updated_by) VALUES ('plan', '计划', 'plan', now(), 't')`,
		`INSERT INTO rsv_resource (category_id, name, created_at) VALUES ('plan', 'r', now())`,
		`INSERT INTO rsv_slot (resource_id, starts_at, ends_at, capacity, created_at, updated_at)
		 SELECT id, now(), now() + interval '1 hour', 100000, now(), now() FROM rsv_resource WHERE category_id = 'plan'`,
		`INSERT INTO rsv_reservation (slot_id, resource_id, category_id, user_id, state, starts_at, ends_at,
		     expected_release_at, created_at, updated_at)
		 SELECT s.id, s.resource_id, 'plan', 'u' || g, 'paid', now() + interval '1 day', now() + interval '1 day 1 hour',
		     now() + interval '1 day', now(), now()
		 FROM rsv_slot s JOIN rsv_resource r ON r.id = s.resource_id AND r.category_id = 'plan', generate_series(1, 20000) g`,
		`ANALYZE rsv_reservation`,
		`UPDATE rsv_reservation SET state = 'pending_payment', hold_expires_at = now() - interval '1 minute' WHERE id % 10 = 0`,
		`SET plan_cache_mode = force_generic_plan`,
		`PREPARE expire_probe AS ` + m.st.sql("ExpireMany"),
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	defer func() {
		_, _ = conn.Exec(context.Background(), "DEALLOCATE expire_probe")
		_, _ = conn.Exec(context.Background(), "RESET plan_cache_mode")
	}()
	rows, err := conn.Query(ctx, "EXPLAIN EXECUTE expire_probe(NULL, NULL, NULL)")
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if !strings.Contains(text, "Index Scan using rsv_reservation_pkey on rsv_reservation r") || strings.Contains(text, "Join Filter") {
		t.Errorf("ExpireMany is not a primary-key lookup per hold:\n%s", text)
	}
}
