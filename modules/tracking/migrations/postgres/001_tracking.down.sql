DROP TABLE IF EXISTS tracking_replay;
DROP TABLE IF EXISTS tracking_security;
DROP TABLE IF EXISTS tracking_gap;
DROP TABLE IF EXISTS tracking_waybill;
DROP TABLE IF EXISTS tracking_collision;
DROP TABLE IF EXISTS tracking_raw_event;
DROP TABLE IF EXISTS tracking_mapping;
DROP TABLE IF EXISTS tracking_mapping_version;
