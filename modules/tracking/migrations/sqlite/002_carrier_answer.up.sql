-- The carrier's own answer to the last full query of a waybill (at
-- verified_at): the event it reports as latest, folded under the mapping
-- active then. Reconciliation compares the aggregate's final state with it.
ALTER TABLE tracking_waybill ADD COLUMN carrier_milestone text NOT NULL DEFAULT '';
ALTER TABLE tracking_waybill ADD COLUMN carrier_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tracking_waybill ADD COLUMN carrier_event_key text NOT NULL DEFAULT '';
