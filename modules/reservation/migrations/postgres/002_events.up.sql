-- Availability events move to the engine's events outbox (keel_events_*):
-- their ids come from this sequence, and the module's outbox keeps only
-- notifications. Pending availability rows are dropped: they are hints for
-- caches, and the next change of each slot emits its counts again.
CREATE SEQUENCE rsv_event_seq;
DELETE FROM rsv_outbox WHERE kind = 'availability';
DROP INDEX IF EXISTS rsv_outbox_events_idx;
