-- Reservations: booking, payment and the user's and operator's transitions.
-- Every transition names the expected state (and version) in its WHERE.

-- name: ReservationInsert
INSERT INTO rsv_reservation (slot_id, resource_id, category_id, user_id, state, starts_at, ends_at,
                             hold_expires_at, waitlist_id, created_at, updated_at)
SELECT s.id, s.resource_id, r.category_id, $2::text, 'pending_payment', s.starts_at, s.ends_at,
       $3::timestamptz, nullif($4::bigint, 0), $5::timestamptz, $5::timestamptz
FROM rsv_slot s JOIN rsv_resource r ON r.id = s.resource_id
WHERE s.id = $1
RETURNING id, version, category_id;

-- name: ReservationGet
SELECT id, slot_id, resource_id, category_id, user_id, state, starts_at, ends_at, grace_minutes,
       expected_release_at, hold_expires_at, appeal_until, version, retry_count, last_error,
       next_retry_at, dead_at, created_at, updated_at, paid_at, checked_in_at, released_at,
       cancelled_at, restored_at, expired_at
FROM rsv_reservation WHERE id = $1;

-- name: ReservationLock
SELECT id, slot_id, resource_id, category_id, user_id, state, starts_at, ends_at, grace_minutes,
       expected_release_at, hold_expires_at, appeal_until, version, retry_count, last_error,
       next_retry_at, dead_at, created_at, updated_at, paid_at, checked_in_at, released_at,
       cancelled_at, restored_at, expired_at
FROM rsv_reservation WHERE id = $1 FOR UPDATE;

-- name: ReservationList
SELECT id, slot_id, resource_id, category_id, user_id, state, starts_at, ends_at, grace_minutes,
       expected_release_at, hold_expires_at, appeal_until, version, retry_count, last_error,
       next_retry_at, dead_at, created_at, updated_at, paid_at, checked_in_at, released_at,
       cancelled_at, restored_at, expired_at
FROM rsv_reservation
WHERE ($1::text = '' OR state = $1)
  AND ($2::bigint = 0 OR slot_id = $2)
  AND ($3::bigint = 0 OR resource_id = $3)
  AND ($4::text = '' OR category_id = $4)
  AND ($5::text = '' OR user_id = $5)
  AND (NOT $6::boolean OR (state = 'paid' AND retry_count > 0 AND dead_at IS NOT NULL))
  AND ($7::bigint = 0 OR id < $7)
ORDER BY id DESC
LIMIT $8;

-- name: ReservationPay
-- The release point is computed by the caller from the start, the category
-- and the business zone, and stored so the scan reads only an index.
-- "(state = 'pending_payment') IS TRUE" keeps the lookup on the primary key
-- (see ExpireMany): with "state = 'pending_payment'" and statistics taken
-- while no hold was pending, the plan was a range of rsv_reservation_hold_idx
-- from $3 on, every hold not yet expired, searched for this one id.
UPDATE rsv_reservation
SET state = 'paid', version = version + 1, paid_at = $3, updated_at = $3, grace_minutes = $4,
    expected_release_at = $5, hold_expires_at = NULL
WHERE id = $1 AND version = $2 AND (state = 'pending_payment') IS TRUE AND hold_expires_at > $3
RETURNING version;

-- name: ReservationCheckIn
UPDATE rsv_reservation
SET state = 'checked_in', version = version + 1, checked_in_at = $3, updated_at = $3
WHERE id = $1 AND version = $2 AND state IN ('paid', 'restored')
RETURNING version;

-- name: ReservationCancel
UPDATE rsv_reservation
SET state = 'cancelled', version = version + 1, cancelled_at = $3, updated_at = $3, hold_expires_at = NULL
WHERE id = $1 AND version = $2 AND state IN ('paid', 'pending_payment')
RETURNING version;

-- name: ReservationRestore
UPDATE rsv_reservation
SET state = 'restored', version = version + 1, restored_at = $3, updated_at = $3
WHERE id = $1 AND version = $2 AND state = 'released' AND appeal_until >= $3
RETURNING version;

-- name: ReservationMove
UPDATE rsv_reservation r
SET slot_id = s.id, resource_id = s.resource_id, category_id = res.category_id,
    starts_at = s.starts_at, ends_at = s.ends_at, grace_minutes = $4, expected_release_at = $5,
    version = r.version + 1, updated_at = $6
FROM rsv_slot s JOIN rsv_resource res ON res.id = s.resource_id
WHERE r.id = $1 AND r.version = $2 AND r.state = 'paid' AND s.id = $3
RETURNING r.version;

-- name: HistoryInsert
INSERT INTO rsv_history (reservation_id, from_state, to_state, version, actor, reason, at)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: HistoryInsertMany
INSERT INTO rsv_history (reservation_id, from_state, to_state, version, actor, reason, at)
SELECT t.id, $3::text, $4::text, t.version, $5::text, $6::text, $7::timestamptz
FROM unnest($1::bigint[], $2::bigint[]) AS t(id, version);

-- name: HistoryList
SELECT from_state, to_state, version, actor, reason, at
FROM rsv_history WHERE reservation_id = $1 ORDER BY version;
