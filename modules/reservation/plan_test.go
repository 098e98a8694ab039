package reservation

import (
	"testing"

	"github.com/keelwork/keel/module/moduletest"
)

// TestPlansAfterAnalyze: the statements that move one reservation or a
// batch of them by id read those rows by primary key, on tables analyzed
// while no hold was pending, no one waited and no dead letter was kept (as
// autovacuum may analyze them at a quiet hour). Written with a plain state
// test, each proved the predicate of a partial index the statistics
// showed empty, and the generic plan a pooled session switches to walked
// that index for the ids: ExpireMany scanned every expired hold and joined
// the batch by a nested loop without an index, ReservationPay ranged over
// every hold not yet expired, WaitlistOffer over every waitlist entry,
// DeadLetterRequeue over every release retry.
func TestPlansAfterAnalyze(t *testing.T) {
	reservation, waitlist := []string{"rsv_reservation_pkey"}, []string{"rsv_waitlist_pkey"}
	moduletest.RequireKeyLookups(t, lines, queryFiles, []string{
		`INSERT INTO rsv_category (id, name_zh, name_en, updated_at, updated_by) VALUES ('plan', '计划', 'plan', now(), 't')`,
		`INSERT INTO rsv_resource (category_id, name, created_at) VALUES ('plan', 'r', now())`,
		`INSERT INTO rsv_slot (resource_id, starts_at, ends_at, capacity, created_at, updated_at)
		 SELECT id, now(), now() + interval '1 hour', 100000, now(), now() FROM rsv_resource WHERE category_id = 'plan'`,
		`INSERT INTO rsv_reservation (slot_id, resource_id, category_id, user_id, state, starts_at, ends_at,
		     expected_release_at, created_at, updated_at)
		 SELECT s.id, s.resource_id, 'plan', 'u' || g, 'checked_in', now() + interval '1 day', now() + interval '1 day 1 hour',
		     now() + interval '1 day', now(), now()
		 FROM rsv_slot s JOIN rsv_resource r ON r.id = s.resource_id AND r.category_id = 'plan', generate_series(1, 20000) g`,
		`INSERT INTO rsv_waitlist (slot_id, user_id, state, created_at, updated_at)
		 SELECT s.id, 'u' || g, 'offered', now(), now()
		 FROM rsv_slot s JOIN rsv_resource r ON r.id = s.resource_id AND r.category_id = 'plan', generate_series(1, 20000) g`,
		`ANALYZE rsv_reservation`,
		`ANALYZE rsv_waitlist`,
		`UPDATE rsv_reservation SET state = 'pending_payment', hold_expires_at = now() + interval '1 minute' WHERE id % 3 = 0`,
		`UPDATE rsv_reservation SET state = 'pending_payment', hold_expires_at = now() - interval '1 minute' WHERE id % 3 = 1`,
		`UPDATE rsv_reservation SET state = 'paid', retry_count = 1, dead_at = now() WHERE id % 3 = 2`,
		`UPDATE rsv_waitlist SET state = 'waiting'`,
	},
		moduletest.Lookup{Statement: "ExpireMany", Relation: "rsv_reservation", Keys: reservation},
		moduletest.Lookup{Statement: "ReservationPay", Relation: "rsv_reservation", Keys: reservation},
		moduletest.Lookup{Statement: "DeadLetterRequeue", Relation: "rsv_reservation", Keys: reservation},
		moduletest.Lookup{Statement: "WaitlistOffer", Relation: "rsv_waitlist", Keys: waitlist})
}
