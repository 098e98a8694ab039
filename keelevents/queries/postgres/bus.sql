-- The in-database bus.

-- name: BusConsumerUpsert
INSERT INTO keel_events_bus_consumer (name, topics, created_at) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET topics = excluded.topics;

-- name: BusConsumers
SELECT name, topics FROM keel_events_bus_consumer;

-- name: BusMessageInsert
-- The unique (topic, event_id) absorbs a republish: no row comes back.
INSERT INTO keel_events_bus_message (topic, event_id, event_key, event_type, part, payload, headers, digest,
                                     emitted_at, published_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (topic, event_id) DO NOTHING
RETURNING seq;

-- name: BusPublish
-- A whole batch in one statement: the messages (a republish of a stored
-- topic and id is absorbed by the unique key and fans out nothing), then
-- one delivery per consumer whose patterns match ("prefix.>" matches
-- topics under "prefix."). Returns the consumers to wake.
WITH m AS (
    INSERT INTO keel_events_bus_message (topic, event_id, event_key, event_type, part, payload, headers, digest,
                                         emitted_at, published_at)
    SELECT t.topic, t.event_id, t.event_key, t.event_type, t.part, t.payload, t.headers, t.digest, t.emitted_at,
           $10::timestamptz
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::integer[], $6::text[], $7::text[],
                $8::text[], $9::timestamptz[]) WITH ORDINALITY AS t(topic, event_id, event_key, event_type, part,
                payload, headers, digest, emitted_at, ord)
    ORDER BY t.ord
    ON CONFLICT (topic, event_id) DO NOTHING
    RETURNING seq, part, topic)
INSERT INTO keel_events_bus_delivery (consumer, seq, part, available_at)
SELECT c.name, m.seq, m.part, $10::timestamptz
FROM m JOIN keel_events_bus_consumer c
  ON EXISTS (SELECT 1 FROM jsonb_array_elements_text(c.topics::jsonb) AS p(pattern)
             WHERE p.pattern = m.topic
                OR (right(p.pattern, 2) = '.>' AND starts_with(m.topic, left(p.pattern, -1))))
RETURNING consumer;

-- name: BusDeliveryInsert
INSERT INTO keel_events_bus_delivery (consumer, seq, part, available_at) VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING;

-- name: BusClaim
-- Leases up to $5 deliveries due at $2 until $3 (the ack wait).
UPDATE keel_events_bus_delivery d SET attempt = d.attempt + 1, available_at = $3, lease_owner = $4
WHERE d.consumer = $1 AND d.seq IN (
    SELECT seq FROM keel_events_bus_delivery
    WHERE consumer = $1 AND available_at <= $2
    ORDER BY seq LIMIT $5 FOR UPDATE SKIP LOCKED)
RETURNING d.seq, d.attempt;

-- name: BusDue
-- Which of the consumers $1 have a delivery due at $2: the bus's one probe
-- for its idle subscribers, the first entry of each consumer's range of
-- keel_events_bus_delivery_avail_idx (consumer, available_at). Scalar with
-- ORDER BY and LIMIT 1 so that it stays a probe per consumer and is never
-- planned as a join over the deliveries. An ordered consumer can be due
-- and still have nothing to claim (its partition's head leased): that
-- costs it one empty claim per probe, what its own polling cost before.
SELECT c.name
FROM unnest($1::text[]) AS c(name)
WHERE (SELECT d.available_at FROM keel_events_bus_delivery d
       WHERE d.consumer = c.name
       ORDER BY d.available_at
       LIMIT 1) <= $2::timestamptz;

-- name: BusClaimOrdered
-- Only the head of each partition is due: a delivery waiting for its
-- redelivery holds back the later ones of its partition.
UPDATE keel_events_bus_delivery d SET attempt = d.attempt + 1, available_at = $3, lease_owner = $4
WHERE d.consumer = $1 AND d.seq IN (
    SELECT h.seq FROM keel_events_bus_delivery h
    WHERE h.consumer = $1 AND h.available_at <= $2
      AND NOT EXISTS (SELECT 1 FROM keel_events_bus_delivery e
                      WHERE e.consumer = h.consumer AND e.part = h.part AND e.seq < h.seq)
    ORDER BY h.seq LIMIT $5 FOR UPDATE SKIP LOCKED)
RETURNING d.seq, d.attempt;

-- name: BusMessages
SELECT seq, topic, event_id, event_key, event_type, part, payload, headers, digest, emitted_at
FROM keel_events_bus_message WHERE seq = ANY($1::bigint[]);

-- name: BusAck
-- Fenced by the attempt: a stale lease holder cannot acknowledge a newer
-- delivery.
DELETE FROM keel_events_bus_delivery WHERE consumer = $1 AND seq = $2 AND attempt = $3;

-- name: BusAckMany
-- BusAck for the deliveries ($2, attempts $3 at the same positions) whose
-- handlers returned meanwhile: one statement and one commit for all, not a
-- commit each (at 500 deliveries/s those commits were the drain's bound).
-- The keys are looked up by the primary key; the attempts are matched per
-- row, not joined, so no plan can start from a scan of the deliveries.
DELETE FROM keel_events_bus_delivery d
WHERE d.consumer = $1 AND d.seq = ANY($2::bigint[])
  AND d.attempt = ($3::integer[])[array_position($2::bigint[], d.seq)];

-- name: BusNack
UPDATE keel_events_bus_delivery SET available_at = $4, lease_owner = ''
WHERE consumer = $1 AND seq = $2 AND attempt = $3;

-- name: BusPrune
-- Messages past the duplicate window that no consumer still waits for.
DELETE FROM keel_events_bus_message WHERE seq IN (
    SELECT m.seq FROM keel_events_bus_message m
    WHERE m.published_at < $1
      AND NOT EXISTS (SELECT 1 FROM keel_events_bus_delivery d WHERE d.seq = m.seq)
    ORDER BY m.seq LIMIT $2);

-- name: BusLag
SELECT count(*) FROM keel_events_bus_delivery WHERE consumer = $1;

-- name: BusClaimFetch
-- BusClaim returning the messages with their attempt, in one round trip.
WITH c AS (
    UPDATE keel_events_bus_delivery d SET attempt = d.attempt + 1, available_at = $3, lease_owner = $4
    WHERE d.consumer = $1 AND d.seq IN (
    SELECT seq FROM keel_events_bus_delivery
    WHERE consumer = $1 AND available_at <= $2
    ORDER BY seq LIMIT $5 FOR UPDATE SKIP LOCKED)
    RETURNING d.seq, d.attempt)
SELECT m.seq, m.topic, m.event_id, m.event_key, m.event_type, m.part, m.payload, m.headers, m.digest,
       m.emitted_at, c.attempt
FROM c JOIN keel_events_bus_message m ON m.seq = c.seq
ORDER BY m.seq;

-- name: BusClaimOrderedFetch
-- BusClaimOrdered returning the messages with their attempt, in one round trip.
WITH c AS (
    UPDATE keel_events_bus_delivery d SET attempt = d.attempt + 1, available_at = $3, lease_owner = $4
    WHERE d.consumer = $1 AND d.seq IN (
    SELECT h.seq FROM keel_events_bus_delivery h
    WHERE h.consumer = $1 AND h.available_at <= $2
      AND NOT EXISTS (SELECT 1 FROM keel_events_bus_delivery e
                      WHERE e.consumer = h.consumer AND e.part = h.part AND e.seq < h.seq)
    ORDER BY h.seq LIMIT $5 FOR UPDATE SKIP LOCKED)
    RETURNING d.seq, d.attempt)
SELECT m.seq, m.topic, m.event_id, m.event_key, m.event_type, m.part, m.payload, m.headers, m.digest,
       m.emitted_at, c.attempt
FROM c JOIN keel_events_bus_message m ON m.seq = c.seq
ORDER BY m.seq;

-- name: BusExtend
-- Extends the lease of a delivery whose handler is still running.
UPDATE keel_events_bus_delivery SET available_at = $4
WHERE consumer = $1 AND seq = $2 AND attempt = $3;
