-- The outbox: notifications and availability events written in the
-- transaction of the change they describe.

-- name: OutboxInsertMany
-- ?9: the caller queues the delivery jobs itself in this transaction;
-- otherwise the relay queues them.
INSERT INTO rsv_outbox (kind, reservation_id, reservation_version, slot_id, user_id, payload,
                        deliver_at, created_at, queued_at)
SELECT k.value, nullif(?2 ->> k.key, 0), ?3 ->> k.key, nullif(?4 ->> k.key, 0), ?5 ->> k.key,
       ?6 ->> k.key, ?7 ->> k.key, ?8,
       CASE WHEN ?9 AND k.value <> 'availability' THEN ?8 END
FROM json_each(?1) k
RETURNING id, kind, deliver_at;

-- name: OutboxGet
-- A notification with the current state and version of its reservation.
SELECT o.id, o.kind, o.user_id, o.state, o.payload, o.deliver_at, o.attempts, o.last_error,
       o.sent_at, coalesce(o.reservation_id, 0), o.reservation_version,
       coalesce(r.state, ''), coalesce(r.version, 0)
FROM rsv_outbox o LEFT JOIN rsv_reservation r ON r.id = o.reservation_id
WHERE o.id = ?1;

-- name: OutboxList
SELECT id, kind, user_id, state, payload, deliver_at, attempts, last_error, sent_at,
       coalesce(reservation_id, 0), reservation_version
FROM rsv_outbox WHERE reservation_id = ?1 ORDER BY id;

-- name: OutboxFinish
-- Ends a pending notification: sent, skipped or failed.
UPDATE rsv_outbox SET state = ?2, attempts = attempts + ?3, sent_at = ?4, last_error = ?5
WHERE id = ?1 AND state = 'pending';

-- name: OutboxAttemptFailed
UPDATE rsv_outbox SET attempts = attempts + 1, last_error = ?2 WHERE id = ?1 AND state = 'pending';

-- name: OutboxPrune
-- Delivered rows are kept a while for inspection; the reservation's history
-- is the permanent record.
DELETE FROM rsv_outbox WHERE id IN (
    SELECT id FROM rsv_outbox WHERE state IN ('sent', 'skipped') AND created_at < ?1 LIMIT ?2);

-- name: OutboxNotesClaim
-- Notifications whose delivery job is not queued yet (written by scans).
SELECT id, kind, deliver_at FROM rsv_outbox
WHERE queued_at IS NULL AND state = 'pending' AND kind <> 'availability'
ORDER BY id
LIMIT ?1;

-- name: OutboxNotesQueued
UPDATE rsv_outbox SET queued_at = ?2 WHERE id IN (SELECT value FROM json_each(?1));

-- name: EventSeqNext
-- The number of the next availability event (its id in the events outbox).
UPDATE rsv_event_seq SET n = n + 1 WHERE singleton = 1 RETURNING n;
