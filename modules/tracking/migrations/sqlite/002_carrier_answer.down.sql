ALTER TABLE tracking_waybill DROP COLUMN carrier_event_key;
ALTER TABLE tracking_waybill DROP COLUMN carrier_seq;
ALTER TABLE tracking_waybill DROP COLUMN carrier_milestone;
