ALTER TABLE tracking_waybill DROP COLUMN carrier_milestone, DROP COLUMN carrier_seq, DROP COLUMN carrier_event_key;
