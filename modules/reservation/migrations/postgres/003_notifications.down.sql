DROP INDEX IF EXISTS rsv_notification_handover_idx;
DROP INDEX IF EXISTS rsv_notification_reservation_idx;
DROP INDEX IF EXISTS rsv_notification_done_idx;
ALTER TABLE rsv_notification RENAME COLUMN handed_at TO queued_at;
ALTER TABLE rsv_notification RENAME TO rsv_outbox;
CREATE INDEX rsv_outbox_dispatch_idx ON rsv_outbox (id)
    WHERE queued_at IS NULL AND state = 'pending' AND kind <> 'availability';
CREATE INDEX rsv_outbox_reservation_idx ON rsv_outbox (reservation_id, id);
CREATE INDEX rsv_outbox_done_idx ON rsv_outbox (created_at) WHERE state IN ('sent', 'skipped');
