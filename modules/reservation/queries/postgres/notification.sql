-- Notifications: the record of each notice (rsv_notification), written in
-- the transaction of the change it describes, together with its hand-over
-- to the events outbox (or to a scheduled engine job for a reminder due
-- later). Nothing polls this table for delivery.

-- name: NotificationInsertMany
INSERT INTO rsv_notification (kind, reservation_id, reservation_version, slot_id, user_id, payload,
                              deliver_at, created_at, handed_at)
SELECT t.kind, nullif(t.reservation_id, 0), t.version, nullif(t.slot_id, 0), t.user_id,
       t.payload::jsonb, t.deliver_at, $8::timestamptz, $8::timestamptz
FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[], $6::text[],
            $7::timestamptz[]) AS t(kind, reservation_id, version, slot_id, user_id, payload, deliver_at)
RETURNING id, kind, deliver_at;

-- name: NotificationGet
-- A notification with the current state and version of its reservation,
-- read in the notifier's inbox transaction.
SELECT o.id, o.kind, o.user_id, o.state, o.payload::text, o.deliver_at, o.attempts, o.last_error,
       o.sent_at, coalesce(o.reservation_id, 0), o.reservation_version,
       coalesce(r.state, ''), coalesce(r.version, 0)
FROM rsv_notification o LEFT JOIN rsv_reservation r ON r.id = o.reservation_id
WHERE o.id = $1;

-- name: NotificationList
SELECT id, kind, user_id, state, payload::text, deliver_at, attempts, last_error, sent_at,
       coalesce(reservation_id, 0), reservation_version
FROM rsv_notification WHERE reservation_id = $1 ORDER BY id;

-- name: NotificationFinish
-- Ends a pending notification: sent, skipped or failed ($3 the delivery
-- attempts it took).
UPDATE rsv_notification SET state = $2, attempts = attempts + $3, sent_at = $4, last_error = $5
WHERE id = $1 AND state = 'pending';

-- name: NotificationPrune
-- Delivered rows are kept a while for inspection; the reservation's history
-- is the permanent record.
DELETE FROM rsv_notification WHERE id IN (
    SELECT id FROM rsv_notification WHERE state IN ('sent', 'skipped') AND created_at < $1 LIMIT $2);

-- name: NotificationLeftovers
-- Notices written before notifications moved to the events outbox and not
-- handed over yet (see migration 003).
SELECT id, kind, deliver_at FROM rsv_notification
WHERE handed_at IS NULL AND state = 'pending'
ORDER BY id
LIMIT $1
FOR UPDATE SKIP LOCKED;

-- name: NotificationHanded
UPDATE rsv_notification SET handed_at = $2 WHERE id = ANY($1::bigint[]);

-- name: EventSeqNext
-- The number of the next availability event (its id in the events outbox).
SELECT nextval('rsv_event_seq');
