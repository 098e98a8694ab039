-- Notifications move onto the engine's events outbox: rsv_outbox stops
-- being an outbox and becomes the record of each notice (what is due, what
-- was sent, skipped or failed). A notice due now is an event emitted in the
-- transaction that wrote its row; a reminder due later is a scheduled
-- engine job that emits the event when due. handed_at is when that
-- happened. Rows written by scans before this migration were waiting for
-- the old relay (queued_at empty): they keep handed_at empty and the
-- module hands them over once at start. Rows whose delivery job was
-- queued keep it: the job now emits the notice's event.
ALTER TABLE rsv_outbox RENAME TO rsv_notification;
ALTER TABLE rsv_notification RENAME COLUMN queued_at TO handed_at;
DROP INDEX IF EXISTS rsv_outbox_dispatch_idx;
DROP INDEX IF EXISTS rsv_outbox_reservation_idx;
DROP INDEX IF EXISTS rsv_outbox_done_idx;
CREATE INDEX rsv_notification_handover_idx ON rsv_notification (id)
    WHERE handed_at IS NULL AND state = 'pending';
CREATE INDEX rsv_notification_reservation_idx ON rsv_notification (reservation_id, id);
CREATE INDEX rsv_notification_done_idx ON rsv_notification (created_at) WHERE state IN ('sent', 'skipped');
