-- Notifications: the record of each notice (rsv_notification), written in
-- the transaction of the change it describes, together with its hand-over
-- to the events outbox (or to a scheduled engine job for a reminder due
-- later). Nothing polls this table for delivery.

-- name: NotificationInsertMany
INSERT INTO rsv_notification (kind, reservation_id, reservation_version, slot_id, user_id, payload,
                              deliver_at, created_at, handed_at)
SELECT k.value, nullif(?2 ->> k.key, 0), ?3 ->> k.key, nullif(?4 ->> k.key, 0), ?5 ->> k.key,
       ?6 ->> k.key, ?7 ->> k.key, ?8, ?8
FROM json_each(?1) k
RETURNING id, kind, deliver_at;

-- name: NotificationGet
-- A notification with the current state and version of its reservation,
-- read in the notifier's inbox transaction.
SELECT o.id, o.kind, o.user_id, o.state, o.payload, o.deliver_at, o.attempts, o.last_error,
       o.sent_at, coalesce(o.reservation_id, 0), o.reservation_version,
       coalesce(r.state, ''), coalesce(r.version, 0)
FROM rsv_notification o LEFT JOIN rsv_reservation r ON r.id = o.reservation_id
WHERE o.id = ?1;

-- name: NotificationList
SELECT id, kind, user_id, state, payload, deliver_at, attempts, last_error, sent_at,
       coalesce(reservation_id, 0), reservation_version
FROM rsv_notification WHERE reservation_id = ?1 ORDER BY id;

-- name: NotificationFinish
-- Ends a pending notification: sent, skipped or failed (?3 the delivery
-- attempts it took).
UPDATE rsv_notification SET state = ?2, attempts = attempts + ?3, sent_at = ?4, last_error = ?5
WHERE id = ?1 AND state = 'pending';

-- name: NotificationPrune
-- Delivered rows are kept a while for inspection; the reservation's history
-- is the permanent record.
DELETE FROM rsv_notification WHERE id IN (
    SELECT id FROM rsv_notification WHERE state IN ('sent', 'skipped') AND created_at < ?1 LIMIT ?2);

-- name: NotificationLeftovers
-- Notices written before notifications moved to the events outbox and not
-- handed over yet (see migration 003).
SELECT id, kind, deliver_at FROM rsv_notification
WHERE handed_at IS NULL AND state = 'pending'
ORDER BY id
LIMIT ?1;

-- name: NotificationHanded
UPDATE rsv_notification SET handed_at = ?2 WHERE id IN (SELECT value FROM json_each(?1));

-- name: EventSeqNext
-- The number of the next availability event (its id in the events outbox).
UPDATE rsv_event_seq SET n = n + 1 WHERE singleton = 1 RETURNING n;
