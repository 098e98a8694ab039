CREATE INDEX rsv_outbox_events_idx ON rsv_outbox (id) WHERE state = 'pending' AND kind = 'availability';
DROP TABLE rsv_event_seq;
