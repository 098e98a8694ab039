package keelevents

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/internal/testdb"
)

// TestRelayFetchPlan: the relay's fetch of the next pending events is
// planned as one ordered scan of the pending index per partition, never a
// bitmap scan and sort of every pending row nor a walk of the primary key
// past the published rows, whatever the statistics say: the table never
// analyzed, analyzed, half published since, analyzed again, and analyzed
// with nothing pending before a burst; with the generic plan a pooled
// session keeps and with custom plans. Its rows are the first pending ones
// of the partitions in seq order.
func TestRelayFetchPlan(t *testing.T) {
	ctx := context.Background()
	d, _ := testdb.OpenPostgres(t, &testdb.Options{Lines: internalLines})
	conn, err := pgx.ConnectConfig(ctx, d.Pool().Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// Autovacuum off for this table: its statistics change only when the
	// test says so.
	exec("ALTER TABLE keel_events_outbox SET (autovacuum_enabled = false)")
	const rows, parts = 200_000, 8
	exec(`INSERT INTO keel_events_outbox (topic, event_id, event_key, event_type, part, payload, digest, emitted_at)
SELECT 't', 'e' || g, 'k' || (g % 1000), 'x', (g % 1000) % $2, repeat('p', 200), 'd', now()
FROM generate_series(1, $1::integer) g`, rows, parts)
	fetch := queries["postgres"]["OutboxPending"]
	exec("PREPARE fetch_pending(integer[], bigint) AS " + fetch)
	want := func(held []int32, limit int) []int64 {
		t.Helper()
		r, err := conn.Query(ctx, `SELECT seq FROM keel_events_outbox WHERE part = ANY($1) AND published_at IS NULL
ORDER BY seq LIMIT $2`, held, limit)
		seqs, err := pgx.CollectRows(r, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		return seqs
	}
	check := func(state string) {
		t.Helper()
		for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
			// As the relay runs it: in a transaction, after OutboxPendingPlan.
			exec("BEGIN")
			exec("SET LOCAL plan_cache_mode = " + mode)
			exec(queries["postgres"]["RelayPlan"])
			held := []int32{1, 5}
			var plan []map[string]any
			if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE fetch_pending('{1,5}', 500)").Scan(&plan); err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(plan)
			text := string(b)
			if strings.Contains(text, "Bitmap") || strings.Contains(text, "keel_events_outbox_pkey") ||
				strings.Contains(text, "Seq Scan") || !strings.Contains(text, "keel_events_outbox_pending_idx") {
				t.Errorf("%s, %s: the fetch is not an ordered scan of the pending index per partition:\n%s", state, mode, text)
			}
			r, err := conn.Query(ctx, "EXECUTE fetch_pending('{1,5}', 500)")
			got, err := pgx.CollectRows(r, func(r pgx.CollectableRow) (int64, error) {
				vals, err := r.Values()
				if err != nil {
					return 0, err
				}
				return vals[0].(int64), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if w := want(held, 500); len(got) != 500 || !equalInts(got, w) {
				t.Errorf("%s, %s: fetched %d rows, not the first 500 pending by seq (%d)", state, mode, len(got), len(w))
			}
			// The mark: primary key lookups of the rows published, the lease
			// read per row, never a scan of the partitions' pending rows.
			exec("PREPARE mark_published(timestamptz, bigint[], text, bigint[]) AS " + queries["postgres"]["OutboxMark"])
			if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE mark_published(now(), '{1,2,3}', 'relay', '{1,1,1,1,1,1,1,1}')").Scan(&plan); err != nil {
				t.Fatal(err)
			}
			b, _ = json.Marshal(plan)
			text = string(b)
			if strings.Contains(text, "Bitmap") || strings.Contains(text, "keel_events_outbox_pending_idx") ||
				!strings.Contains(text, "keel_events_outbox_pkey") {
				t.Errorf("%s, %s: the mark is not primary key lookups:\n%s", state, mode, text)
			}
			exec("DEALLOCATE mark_published")
			// A failed publish's count: one row by primary key, not the
			// pending index's walk to its seq.
			exec("PREPARE count_attempt(bigint, integer) AS " + queries["postgres"]["OutboxAttempt"])
			if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE count_attempt(2, 0)").Scan(&plan); err != nil {
				t.Fatal(err)
			}
			b, _ = json.Marshal(plan)
			text = string(b)
			if strings.Contains(text, "keel_events_outbox_pending_idx") || !strings.Contains(text, "keel_events_outbox_pkey") {
				t.Errorf("%s, %s: the attempt count is not a primary key lookup:\n%s", state, mode, text)
			}
			exec("DEALLOCATE count_attempt")
			exec("COMMIT")
		}
	}
	check("never analyzed")
	exec("ANALYZE keel_events_outbox")
	check("analyzed")
	exec("UPDATE keel_events_outbox SET published_at = now() WHERE seq <= $1", rows/2)
	check("half published, statistics from before")
	exec("ANALYZE keel_events_outbox")
	check("half published, analyzed")
	// Analyzed at a quiet moment, everything published, then a burst: the
	// statistics show the pending index empty while it holds every row.
	// Marks written "published_at IS NULL" proved its predicate and were
	// planned as a walk of it (123 ms per mark at 200,000 pending).
	exec("UPDATE keel_events_outbox SET published_at = now() WHERE published_at IS NULL")
	exec("ANALYZE keel_events_outbox")
	exec("UPDATE keel_events_outbox SET published_at = NULL")
	check("analyzed with nothing pending, all pending since")
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
