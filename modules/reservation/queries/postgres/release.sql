-- The release: claims, the state change, failures and dead letters.

-- name: ClaimDue
-- The scan's claim: due, paid, never failed, one category, through
-- rsv_reservation_due_idx, after ($4, $5): where this run's previous claim
-- ended, so a run walks the index once, never again over the entries of
-- rows it already released (or failed; they are retried at its end).
-- Rows another instance holds are skipped. $6 sets synchronous_commit for
-- the rest of the transaction (reservation.async_commit; see commitMode).
WITH commit_mode AS (SELECT set_config('synchronous_commit', $6::text, true))
SELECT r.id, r.slot_id, r.user_id, r.category_id, r.version, r.expected_release_at
FROM rsv_reservation r, commit_mode
WHERE r.category_id = $1 AND r.state = 'paid' AND r.retry_count = 0 AND r.expected_release_at <= $2
  AND (r.expected_release_at, r.id) > ($4::timestamptz, $5::bigint)
ORDER BY r.expected_release_at, r.id
LIMIT $3
FOR UPDATE OF r SKIP LOCKED;

-- name: ClaimDueSlot
-- The availability read's assist: one slot's due reservations in released
-- categories.
SELECT r.id, r.slot_id, r.user_id, r.category_id, r.version, r.expected_release_at
FROM rsv_reservation r JOIN rsv_category c ON c.id = r.category_id
WHERE r.slot_id = $1 AND r.state = 'paid' AND r.retry_count = 0 AND r.expected_release_at <= $2
  AND c.release_mode = 'on'
ORDER BY r.expected_release_at, r.id
LIMIT $3
FOR UPDATE OF r SKIP LOCKED;

-- name: ClaimOne
-- One reservation at its version: the precise job ($4 = false: never
-- failed) and in-run retries and compensation ($4 = true).
SELECT id, slot_id, user_id, category_id, version, expected_release_at
FROM rsv_reservation
WHERE id = $1 AND version = $2 AND state = 'paid' AND expected_release_at <= $3
  AND ($4::boolean OR retry_count = 0)
FOR UPDATE SKIP LOCKED;

-- name: DueDryRun
SELECT id, slot_id, user_id, category_id, version, expected_release_at
FROM rsv_reservation
WHERE category_id = $1 AND state = 'paid' AND retry_count = 0 AND expected_release_at <= $2
ORDER BY expected_release_at, id
LIMIT $3;

-- name: DueCount
-- Per category, so each count is a range of rsv_reservation_due_idx.
SELECT coalesce(sum((SELECT count(*) FROM rsv_reservation r
                     WHERE r.category_id = c.id AND r.state = 'paid' AND r.retry_count = 0
                       AND r.expected_release_at <= $1)), 0)
FROM rsv_category c;

-- name: DueCountDryRun
-- The part of DueCount in dry-run categories: counted, never released.
SELECT coalesce(sum((SELECT count(*) FROM rsv_reservation r
                     WHERE r.category_id = c.id AND r.state = 'paid' AND r.retry_count = 0
                       AND r.expected_release_at <= $1)), 0)
FROM rsv_category c
WHERE c.release_mode = 'dry_run';

-- name: ReleaseMany
-- The whole release of one transaction's candidates in one statement
-- (they are held by its claim): return each place to its slot (slots
-- locked in id order, so concurrent releases queue instead of deadlocking;
-- a slot holding fewer places than it would get back is left alone and its
-- reservations stay paid), mark released, append history and no-shows, and
-- write the release notices (the caller emits the availability event from
-- the 's' rows, and the notices' events from the 'n' rows, in this
-- transaction). $1 ids, $2 versions, $3 the slot of each, $4 now, $5 actor,
-- $6 reason.
-- Rows: 'r' released (id, version, appeal_until, slot), 's' slots that took
-- places back (id, capacity, held, waiting, ends_at, places), 'n' notices.
WITH counts AS (
    SELECT slot_id, count(*)::integer AS n FROM unnest($3::bigint[]) AS slot_id GROUP BY slot_id),
locked AS (
    SELECT s.id FROM rsv_slot s WHERE s.id IN (SELECT slot_id FROM counts) ORDER BY s.id FOR UPDATE),
slots AS (
    UPDATE rsv_slot s
    SET held = s.held - c.n, version = s.version + 1, updated_at = $4
    FROM counts c, locked l
    WHERE s.id = c.slot_id AND l.id = s.id AND s.held >= c.n
    RETURNING s.id, s.capacity, s.held, s.waiting, s.ends_at, c.n),
rel AS (
    UPDATE rsv_reservation r
    SET state = 'released', version = r.version + 1, released_at = $4, updated_at = $4,
        appeal_until = $4 + cat.appeal_minutes * interval '1 minute'
    FROM unnest($1::bigint[], $2::bigint[]) AS t(id, version), rsv_category cat, slots
    WHERE r.id = t.id AND r.version = t.version AND r.state = 'paid' AND r.expected_release_at <= $4
      AND cat.id = r.category_id AND slots.id = r.slot_id
    RETURNING r.id, r.version, r.appeal_until, r.user_id, r.category_id, r.slot_id),
hist AS (
    INSERT INTO rsv_history (reservation_id, from_state, to_state, version, actor, reason, at)
    SELECT id, 'paid', 'released', version, $5::text, $6::text, $4::timestamptz FROM rel),
noshow AS (
    INSERT INTO rsv_noshow (user_id, reservation_id, category_id, at)
    SELECT user_id, id, category_id, $4::timestamptz FROM rel
    ON CONFLICT (reservation_id) DO NOTHING),
notes AS (
    INSERT INTO rsv_notification (kind, reservation_id, reservation_version, slot_id, user_id, payload,
                                  deliver_at, created_at, handed_at)
    SELECT 'release', id, version, slot_id, user_id,
           jsonb_build_object('appeal_until', to_char(appeal_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')),
           $4::timestamptz, $4::timestamptz, $4::timestamptz
    FROM rel
    RETURNING id, deliver_at)
SELECT 'r', id, version, appeal_until, slot_id, 0, 0, 0, 0 FROM rel
UNION ALL
SELECT 's', id, 0, ends_at, 0, capacity, held, waiting, n FROM slots
UNION ALL
SELECT 'n', id, 0, deliver_at, 0, 0, 0, 0, 0 FROM notes;

-- name: MarkFailed
-- A record the run could not release: counted, its error kept, handed to
-- compensation; past $5 failures it becomes a dead letter.
UPDATE rsv_reservation
SET retry_count = retry_count + 1, last_error = $3, next_retry_at = $4,
    dead_at = CASE WHEN retry_count + 1 >= $5 THEN $6::timestamptz ELSE NULL END
WHERE id = $1 AND version = $2 AND state = 'paid' AND dead_at IS NULL
RETURNING retry_count, dead_at IS NOT NULL;

-- name: RetryDue
SELECT id, version FROM rsv_reservation
WHERE state = 'paid' AND retry_count > 0 AND dead_at IS NULL AND next_retry_at <= $1
ORDER BY next_retry_at, id
LIMIT $2;

-- name: DeadLetterCount
SELECT count(*) FROM rsv_reservation WHERE state = 'paid' AND retry_count > 0 AND dead_at IS NOT NULL;

-- name: DeadLetterRequeue
-- An operator hands a dead letter back to the scan. The state test in the
-- IS TRUE form keeps the lookup on the primary key (see ExpireMany), not
-- a walk of rsv_reservation_retry_idx.
UPDATE rsv_reservation
SET retry_count = 0, last_error = '', next_retry_at = NULL, dead_at = NULL, updated_at = $2
WHERE id = $1 AND (state = 'paid') IS TRUE AND retry_count > 0 AND dead_at IS NOT NULL
RETURNING version;

-- name: ClaimHolds
-- Unpaid bookings and waitlist offers whose hold lapsed.
SELECT id, slot_id, user_id, category_id, version, hold_expires_at
FROM rsv_reservation
WHERE state = 'pending_payment' AND hold_expires_at <= $1
ORDER BY hold_expires_at, id
LIMIT $2
FOR UPDATE SKIP LOCKED;

-- name: ExpireMany
-- The state test is "(r.state = 'pending_payment') IS TRUE": the same
-- meaning, but it does not prove rsv_reservation_hold_idx's predicate.
-- With "r.state = 'pending_payment'", statistics taken while no hold was
-- pending made the planner scan every expired hold by that index and join
-- the batch by a nested loop without an index; this way each hold is one
-- primary-key probe (TestPlansAfterAnalyze).
UPDATE rsv_reservation r
SET state = 'expired', version = r.version + 1, expired_at = $3, updated_at = $3
FROM unnest($1::bigint[], $2::bigint[]) AS t(id, version)
WHERE r.id = t.id AND r.version = t.version AND (r.state = 'pending_payment') IS TRUE AND r.hold_expires_at <= $3
RETURNING r.id, r.version, r.waitlist_id IS NOT NULL;

-- name: DoubleReleases
-- Reservations released more than once: must always be zero.
SELECT count(*) FROM (SELECT reservation_id FROM rsv_history WHERE to_state = 'released'
                      GROUP BY reservation_id HAVING count(*) > 1) AS d;

-- name: StateCounts
SELECT state, count(*) FROM rsv_reservation GROUP BY state ORDER BY state;
