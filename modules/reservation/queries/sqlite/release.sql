-- The release: claims, the state change, failures and dead letters.

-- name: ClaimDue
-- The scan's claim: due, paid, never failed, one category, through
-- rsv_reservation_due_idx, after (?4, ?5): where this run's previous claim
-- ended (rows it failed are retried at its end). SQLite has one writer:
-- the write transaction holding the claim excludes every other release.
SELECT id, slot_id, user_id, category_id, version, expected_release_at
FROM rsv_reservation
WHERE category_id = ?1 AND state = 'paid' AND retry_count = 0 AND expected_release_at <= ?2
  AND (expected_release_at, id) > (?4, ?5)
ORDER BY expected_release_at, id
LIMIT ?3;

-- name: ClaimDueSlot
-- The availability read's assist: one slot's due reservations in released
-- categories.
SELECT r.id, r.slot_id, r.user_id, r.category_id, r.version, r.expected_release_at
FROM rsv_reservation r JOIN rsv_category c ON c.id = r.category_id
WHERE r.slot_id = ?1 AND r.state = 'paid' AND r.retry_count = 0 AND r.expected_release_at <= ?2
  AND c.release_mode = 'on'
ORDER BY r.expected_release_at, r.id
LIMIT ?3;

-- name: ClaimOne
-- One reservation at its version: the precise job (?4 = false: never
-- failed) and in-run retries and compensation (?4 = true).
SELECT id, slot_id, user_id, category_id, version, expected_release_at
FROM rsv_reservation
WHERE id = ?1 AND version = ?2 AND state = 'paid' AND expected_release_at <= ?3
  AND (?4 OR retry_count = 0);

-- name: DueDryRun
SELECT id, slot_id, user_id, category_id, version, expected_release_at
FROM rsv_reservation
WHERE category_id = ?1 AND state = 'paid' AND retry_count = 0 AND expected_release_at <= ?2
ORDER BY expected_release_at, id
LIMIT ?3;

-- name: DueCount
-- Per category, so each count is a range of rsv_reservation_due_idx.
SELECT coalesce(sum((SELECT count(*) FROM rsv_reservation r
                     WHERE r.category_id = c.id AND r.state = 'paid' AND r.retry_count = 0
                       AND r.expected_release_at <= ?1)), 0)
FROM rsv_category c;

-- name: DueCountDryRun
-- The part of DueCount in dry-run categories: counted, never released.
SELECT coalesce(sum((SELECT count(*) FROM rsv_reservation r
                     WHERE r.category_id = c.id AND r.state = 'paid' AND r.retry_count = 0
                       AND r.expected_release_at <= ?1)), 0)
FROM rsv_category c
WHERE c.release_mode = 'dry_run';

-- name: ReleaseMany
-- SQLite has no data-modifying CTEs: history and no-shows are separate
-- statements (HistoryInsertMany, NoShowInsertMany).
UPDATE rsv_reservation
SET state = 'released', version = version + 1, released_at = ?3, updated_at = ?3,
    appeal_until = ?3 + (SELECT c.appeal_minutes FROM rsv_category c
                         WHERE c.id = rsv_reservation.category_id) * 60000000
FROM (SELECT a.value AS tid, ?2 ->> a.key AS tversion FROM json_each(?1) a) AS t
WHERE rsv_reservation.id = t.tid AND rsv_reservation.version = t.tversion
  AND rsv_reservation.state = 'paid' AND rsv_reservation.expected_release_at <= ?3
RETURNING id, version, appeal_until;

-- name: MarkFailed
-- A record the run could not release: counted, its error kept, handed to
-- compensation; past ?5 failures it becomes a dead letter.
UPDATE rsv_reservation
SET retry_count = retry_count + 1, last_error = ?3, next_retry_at = ?4,
    dead_at = CASE WHEN retry_count + 1 >= ?5 THEN ?6 ELSE NULL END
WHERE id = ?1 AND version = ?2 AND state = 'paid' AND dead_at IS NULL
RETURNING retry_count, dead_at IS NOT NULL;

-- name: RetryDue
SELECT id, version FROM rsv_reservation
WHERE state = 'paid' AND retry_count > 0 AND dead_at IS NULL AND next_retry_at <= ?1
ORDER BY next_retry_at, id
LIMIT ?2;

-- name: DeadLetterCount
SELECT count(*) FROM rsv_reservation WHERE state = 'paid' AND retry_count > 0 AND dead_at IS NOT NULL;

-- name: DeadLetterRequeue
-- An operator hands a dead letter back to the scan.
UPDATE rsv_reservation
SET retry_count = 0, last_error = '', next_retry_at = NULL, dead_at = NULL, updated_at = ?2
WHERE id = ?1 AND state = 'paid' AND retry_count > 0 AND dead_at IS NOT NULL
RETURNING version;

-- name: ClaimHolds
-- Unpaid bookings and waitlist offers whose hold lapsed.
SELECT id, slot_id, user_id, category_id, version, hold_expires_at
FROM rsv_reservation
WHERE state = 'pending_payment' AND hold_expires_at <= ?1
ORDER BY hold_expires_at, id
LIMIT ?2;

-- name: ExpireMany
UPDATE rsv_reservation
SET state = 'expired', version = version + 1, expired_at = ?3, updated_at = ?3
FROM (SELECT a.value AS tid, ?2 ->> a.key AS tversion FROM json_each(?1) a) AS t
WHERE rsv_reservation.id = t.tid AND rsv_reservation.version = t.tversion
  AND rsv_reservation.state = 'pending_payment' AND rsv_reservation.hold_expires_at <= ?3
RETURNING id, version, waitlist_id IS NOT NULL;

-- name: DoubleReleases
-- Reservations released more than once: must always be zero.
SELECT count(*) FROM (SELECT reservation_id FROM rsv_history WHERE to_state = 'released'
                      GROUP BY reservation_id HAVING count(*) > 1) AS d;

-- name: StateCounts
SELECT state, count(*) FROM rsv_reservation GROUP BY state ORDER BY state;
