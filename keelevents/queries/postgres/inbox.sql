-- Inbox consumers, the inbox, quarantine, manual and projections.

-- name: ConsumerUpsert
INSERT INTO keel_events_consumer (name, topics, ordered, max_attempts, created_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (name) DO UPDATE SET topics = excluded.topics, ordered = excluded.ordered,
                                 max_attempts = excluded.max_attempts;

-- name: ConsumerList
SELECT name, topics, ordered, max_attempts, created_at, duplicates FROM keel_events_consumer ORDER BY name;

-- name: ConsumerDuplicate
UPDATE keel_events_consumer SET duplicates = duplicates + 1 WHERE name = $1;

-- name: InboxInsert
INSERT INTO keel_events_inbox (consumer, topic, event_id, digest, event_key, payload, state, attempts, at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (consumer, topic, event_id) DO NOTHING;

-- name: InboxGet
SELECT digest, payload, state FROM keel_events_inbox WHERE consumer = $1 AND topic = $2 AND event_id = $3;

-- name: InboxByEvent
SELECT consumer, digest, state, attempts, at FROM keel_events_inbox WHERE topic = $1 AND event_id = $2
ORDER BY consumer;

-- name: InboxReplayed
UPDATE keel_events_inbox SET state = 'applied', attempts = $4, at = $5
WHERE consumer = $1 AND topic = $2 AND event_id = $3 AND state = 'manual';

-- name: InboxCounts
SELECT consumer, count(*) FILTER (WHERE state = 'applied') FROM keel_events_inbox GROUP BY consumer;

-- name: InboxLag
-- Events of a consumer's topic pattern ($2 exact, or $3 a LIKE prefix)
-- emitted since it was created, not yet in its inbox.
SELECT count(*), min(o.emitted_at) FROM keel_events_outbox o
WHERE (o.topic = $2 OR ($3 <> '' AND o.topic LIKE $3 ESCAPE '\')) AND o.emitted_at >= $4
  AND NOT EXISTS (SELECT 1 FROM keel_events_inbox i
                  WHERE i.consumer = $1 AND i.topic = o.topic AND i.event_id = o.event_id);

-- name: QuarantineInsert
INSERT INTO keel_events_quarantine (consumer, topic, event_id, event_key, applied_digest, applied_payload,
                                    digest, payload, at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (consumer, topic, event_id, digest) DO UPDATE SET seen = keel_events_quarantine.seen + 1
RETURNING seen;

-- name: QuarantineList
SELECT id, consumer, topic, event_id, event_key, applied_digest, applied_payload, digest, payload, seen, at
FROM keel_events_quarantine
WHERE ($1 = '' OR consumer = $1) AND id > $2
ORDER BY id LIMIT $3;

-- name: QuarantineCounts
SELECT consumer, count(*) FROM keel_events_quarantine GROUP BY consumer;

-- name: ManualInsert
INSERT INTO keel_events_manual (consumer, topic, event_id, event_key, event_type, part, payload, headers,
                                digest, emitted_at, attempts, last_error, state, at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'manual', $13)
ON CONFLICT (consumer, topic, event_id) DO NOTHING;

-- name: ManualList
SELECT id, consumer, topic, event_id, event_key, event_type, part, payload, headers, digest, emitted_at,
       attempts, last_error, state, at, replayed_at
FROM keel_events_manual
WHERE ($1 = '' OR consumer = $1) AND ($2 = '' OR state = $2) AND id > $3
ORDER BY id LIMIT $4;

-- name: ManualGet
SELECT id, consumer, topic, event_id, event_key, event_type, part, payload, headers, digest, emitted_at,
       attempts, last_error, state, at, replayed_at
FROM keel_events_manual WHERE id = $1;

-- name: ManualReplayed
UPDATE keel_events_manual SET state = 'replayed', replayed_at = $2, attempts = attempts + 1
WHERE id = $1 AND state = 'manual';

-- name: ManualReplayFailed
UPDATE keel_events_manual SET attempts = attempts + 1, last_error = $2 WHERE id = $1 AND state = 'manual';

-- name: ManualCounts
SELECT consumer, count(*) FROM keel_events_manual WHERE state = 'manual' GROUP BY consumer;

-- name: ManualByEvent
SELECT id, consumer, state FROM keel_events_manual WHERE topic = $1 AND event_id = $2 ORDER BY id;

-- name: VersionApply
-- Applies only a newer version: no row is affected otherwise.
INSERT INTO keel_events_version (projection, proj_key, version, at) VALUES ($1, $2, $3, $4)
ON CONFLICT (projection, proj_key) DO UPDATE SET version = excluded.version, at = excluded.at
WHERE keel_events_version.version < excluded.version;

-- name: VersionGet
SELECT version FROM keel_events_version WHERE projection = $1 AND proj_key = $2;

-- name: VersionStale
INSERT INTO keel_events_version_stale (projection, proj_key, version, current, at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT DO NOTHING;

-- name: InboxInsertMany
-- The inbox rows of a batch of deliveries in one statement (Consumer.Batch):
-- RETURNING names the rows inserted; a delivery whose row was there already
-- (a redelivery, or the same id with another payload) is then handled one
-- by one, as by InboxInsert.
INSERT INTO keel_events_inbox (consumer, topic, event_id, digest, event_key, payload, state, attempts, at)
SELECT $1, u.topic, u.event_id, u.digest, u.event_key, u.payload, 'applied', u.attempts, $8
FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[])
         AS u(topic, event_id, digest, event_key, payload, attempts)
ON CONFLICT (consumer, topic, event_id) DO NOTHING
RETURNING topic, event_id;

-- name: InboxForget
-- Takes back, inside the batch's transaction, the inbox row of a delivery
-- its handler reported failed (BatchErrors): the row was written by this
-- transaction's InboxInsertMany, and without it the redelivery is applied.
DELETE FROM keel_events_inbox WHERE consumer = $1 AND topic = $2 AND event_id = $3 AND state = 'applied';
