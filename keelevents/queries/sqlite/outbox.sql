-- The outbox and its archive.

-- name: MetaGet
SELECT partitions FROM keel_events_meta;

-- name: MetaInit
INSERT INTO keel_events_meta (partitions) VALUES (?1) ON CONFLICT DO NOTHING;

-- name: OutboxInsert
-- An id already archived is not written again (EmitTx then compares the
-- digests).
INSERT INTO keel_events_outbox (topic, event_id, event_key, event_type, part, payload, headers, digest, emitted_at)
SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9
WHERE NOT EXISTS (SELECT 1 FROM keel_events_archive a WHERE a.topic = ?1 AND a.event_id = ?2)
ON CONFLICT (topic, event_id) DO NOTHING;

-- name: OutboxDigest
SELECT digest FROM keel_events_outbox WHERE topic = ?1 AND event_id = ?2
UNION ALL
SELECT digest FROM keel_events_archive WHERE topic = ?1 AND event_id = ?2;

-- name: OutboxPending
-- The next unpublished events of the partitions a relay holds, in emit
-- order (per key, seq order is commit order for serialized writers).
SELECT seq, topic, event_id, event_key, event_type, part, payload, headers, digest, emitted_at
FROM keel_events_outbox
WHERE part IN (SELECT value FROM json_each(?1)) AND published_at IS NULL
ORDER BY seq
LIMIT ?2;

-- name: OutboxPendingParts
-- Which of the partitions ?1 have an unpublished event: the idle relay's
-- one probe for its parked lanes, one probe of
-- keel_events_outbox_pending_idx (part, seq) per partition.
SELECT p.value
FROM json_each(?1) AS p
WHERE EXISTS (SELECT 1 FROM keel_events_outbox x WHERE x.part = p.value AND x.published_at IS NULL);

-- name: OutboxMark
-- Fenced: a row is marked only while its partition is held by this relay
-- (?3) at the fence it holds it with (?4[part]); returns the partition of
-- each row marked.
UPDATE keel_events_outbox SET published_at = ?1, attempts = attempts + 1
WHERE seq IN (SELECT value FROM json_each(?2)) AND published_at IS NULL
  AND EXISTS (SELECT 1 FROM keel_events_relay_lease l
              WHERE l.part = keel_events_outbox.part AND l.owner = ?3
                AND l.fence = json_extract(?4, '$[' || keel_events_outbox.part || ']'))
RETURNING part;

-- name: OutboxAttempt
-- A publish that failed (?2 = 1 when its outcome is unknown).
UPDATE keel_events_outbox SET attempts = attempts + 1, unknown = unknown + ?2
WHERE seq = ?1 AND published_at IS NULL;

-- name: OutboxArchive
-- Copies published events past the horizon to the archive...
INSERT INTO keel_events_archive (topic, event_id, event_key, event_type, digest, part, emitted_at,
                                 published_at, attempts, unknown, archived_at)
SELECT topic, event_id, event_key, event_type, digest, part, emitted_at, published_at, attempts, unknown, ?2
FROM keel_events_outbox
WHERE published_at < ?1
ORDER BY published_at
LIMIT ?3
ON CONFLICT (topic, event_id) DO NOTHING;

-- name: OutboxArchived
-- ...then deletes what the archive holds.
DELETE FROM keel_events_outbox AS o
WHERE o.published_at < ?1
  AND EXISTS (SELECT 1 FROM keel_events_archive a WHERE a.topic = o.topic AND a.event_id = o.event_id);

-- name: OutboxTopicStats
SELECT topic,
       count(*) FILTER (WHERE published_at IS NULL),
       min(emitted_at) FILTER (WHERE published_at IS NULL),
       count(*) FILTER (WHERE published_at IS NOT NULL),
       coalesce(sum(attempts), 0), coalesce(sum(unknown), 0)
FROM keel_events_outbox GROUP BY topic;

-- name: ArchiveTopicStats
SELECT topic, count(*), coalesce(sum(attempts), 0), coalesce(sum(unknown), 0)
FROM keel_events_archive GROUP BY topic;

-- name: OutboxGet
SELECT seq, topic, event_id, event_key, event_type, part, payload, headers, digest, emitted_at,
       published_at, attempts, unknown
FROM keel_events_outbox WHERE topic = ?1 AND event_id = ?2;

-- name: ArchiveGet
SELECT event_key, event_type, digest, part, emitted_at, published_at, attempts, unknown, archived_at
FROM keel_events_archive WHERE topic = ?1 AND event_id = ?2;

-- name: ArchiveList
-- The summaries reconciliation reads, by emit time.
SELECT topic, event_id, event_key, event_type, digest, emitted_at, published_at
FROM keel_events_archive
WHERE topic = ?1 AND emitted_at >= ?2 AND emitted_at < ?3
ORDER BY emitted_at, event_id
LIMIT ?4;
