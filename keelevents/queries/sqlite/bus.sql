-- The in-database bus.

-- name: BusConsumerUpsert
INSERT INTO keel_events_bus_consumer (name, topics, created_at) VALUES (?1, ?2, ?3)
ON CONFLICT (name) DO UPDATE SET topics = excluded.topics;

-- name: BusConsumers
SELECT name, topics FROM keel_events_bus_consumer;

-- name: BusMessageInsert
-- The unique (topic, event_id) absorbs a republish: no row comes back.
INSERT INTO keel_events_bus_message (topic, event_id, event_key, event_type, part, payload, headers, digest,
                                     emitted_at, published_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
ON CONFLICT (topic, event_id) DO NOTHING
RETURNING seq;

-- name: BusDeliveryInsert
INSERT INTO keel_events_bus_delivery (consumer, seq, part, available_at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT DO NOTHING;

-- name: BusClaim
-- Leases up to ?5 deliveries due at ?2 until ?3 (the ack wait).
UPDATE keel_events_bus_delivery SET attempt = attempt + 1, available_at = ?3, lease_owner = ?4
WHERE consumer = ?1 AND seq IN (
    SELECT seq FROM keel_events_bus_delivery
    WHERE consumer = ?1 AND available_at <= ?2
    ORDER BY seq LIMIT ?5)
RETURNING seq, attempt;

-- name: BusDue
-- Which of the consumers ?1 have a delivery due at ?2: the bus's one probe
-- for its idle subscribers, the first entry of each consumer's range of
-- keel_events_bus_delivery_avail_idx (consumer, available_at).
SELECT c.value
FROM json_each(?1) AS c
WHERE (SELECT min(d.available_at) FROM keel_events_bus_delivery d WHERE d.consumer = c.value) <= ?2;

-- name: BusClaimOrdered
-- Only the head of each partition is due: a delivery waiting for its
-- redelivery holds back the later ones of its partition.
UPDATE keel_events_bus_delivery SET attempt = attempt + 1, available_at = ?3, lease_owner = ?4
WHERE consumer = ?1 AND seq IN (
    SELECT h.seq FROM keel_events_bus_delivery h
    WHERE h.consumer = ?1 AND h.available_at <= ?2
      AND NOT EXISTS (SELECT 1 FROM keel_events_bus_delivery e
                      WHERE e.consumer = h.consumer AND e.part = h.part AND e.seq < h.seq)
    ORDER BY h.seq LIMIT ?5)
RETURNING seq, attempt;

-- name: BusMessages
SELECT seq, topic, event_id, event_key, event_type, part, payload, headers, digest, emitted_at
FROM keel_events_bus_message WHERE seq IN (SELECT value FROM json_each(?1));

-- name: BusAck
-- Fenced by the attempt: a stale lease holder cannot acknowledge a newer
-- delivery.
DELETE FROM keel_events_bus_delivery WHERE consumer = ?1 AND seq = ?2 AND attempt = ?3;

-- name: BusNack
UPDATE keel_events_bus_delivery SET available_at = ?4, lease_owner = ''
WHERE consumer = ?1 AND seq = ?2 AND attempt = ?3;

-- name: BusPrune
-- Messages past the duplicate window that no consumer still waits for.
DELETE FROM keel_events_bus_message WHERE seq IN (
    SELECT m.seq FROM keel_events_bus_message m
    WHERE m.published_at < ?1
      AND NOT EXISTS (SELECT 1 FROM keel_events_bus_delivery d WHERE d.seq = m.seq)
    ORDER BY m.seq LIMIT ?2);

-- name: BusLag
SELECT count(*) FROM keel_events_bus_delivery WHERE consumer = ?1;

-- name: BusExtend
-- Extends the lease of a delivery whose handler is still running.
UPDATE keel_events_bus_delivery SET available_at = ?4
WHERE consumer = ?1 AND seq = ?2 AND attempt = ?3;
