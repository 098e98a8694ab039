-- The outbox and its archive.

-- name: MetaGet
SELECT partitions FROM keel_events_meta;

-- name: MetaInit
INSERT INTO keel_events_meta (partitions) VALUES ($1) ON CONFLICT DO NOTHING;

-- name: OutboxInsert
-- An id already archived is not written again (EmitTx then compares the
-- digests).
INSERT INTO keel_events_outbox (topic, event_id, event_key, event_type, part, payload, headers, digest, emitted_at)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9
WHERE NOT EXISTS (SELECT 1 FROM keel_events_archive a WHERE a.topic = $1 AND a.event_id = $2)
ON CONFLICT (topic, event_id) DO NOTHING;

-- name: OutboxInsertNotify
-- OutboxInsert that also notifies channel $10 when a row is written: the
-- relays' listeners wake when the transaction commits, not before.
WITH ins AS (
    INSERT INTO keel_events_outbox (topic, event_id, event_key, event_type, part, payload, headers, digest, emitted_at)
    SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9
    WHERE NOT EXISTS (SELECT 1 FROM keel_events_archive a WHERE a.topic = $1 AND a.event_id = $2)
    ON CONFLICT (topic, event_id) DO NOTHING
    RETURNING 1)
SELECT count(*) FROM ins CROSS JOIN LATERAL (SELECT pg_notify($10::text, '')) AS n;

-- name: CurrentSchema
SELECT coalesce(current_schema(), '');

-- name: OutboxDigest
SELECT digest FROM keel_events_outbox WHERE topic = $1 AND event_id = $2
UNION ALL
SELECT digest FROM keel_events_archive WHERE topic = $1 AND event_id = $2;

-- name: RelayPlan
-- Run in the transaction of OutboxPending or OutboxMark just before it: its
-- plan may use
-- neither a bitmap scan nor a sequential scan, for this transaction only
-- (set_config(..., true) is SET LOCAL). With few rows estimated per
-- partition (a table never analyzed, or analyzed while small) the planner
-- prices a bitmap scan of the partition's pending rows and a sort below
-- the ordered index scan, and then reads every pending row of the
-- partition per fetch. Forbidding those two leaves the ordered scan of
-- keel_events_outbox_pending_idx, which the query is written to have.
SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true);

-- name: OutboxPending
-- The next unpublished events of the partitions a relay holds, in emit
-- order (per key, seq order is commit order for serialized writers).
--
-- Written so that its cost is the batch, not the backlog, whatever the
-- table's statistics: one ordered scan of the pending index per partition,
-- stopped at $2 rows, then the partitions' heads merged by seq. The plain
-- form (part = ANY($1) ... ORDER BY seq) has two plans that grow with the
-- table: with statistics missing a bitmap scan of every pending row of the
-- partitions and a sort (seconds per fetch at 2,400,000 pending), with them
-- a walk of the primary key in seq order that filters past every published
-- row at the head (5 s per fetch once 1,200,000 were published). Here the
-- partition is bounded by a range (part >= p AND part <= p), not an
-- equality, on purpose: with an equality the planner drops part from the
-- ordering and the primary key serves ORDER BY seq again; with the range
-- only keel_events_outbox_pending_idx (part, seq) yields the order, so any
-- other index path must sort everything it reads; RelayPlan takes
-- the bitmap and sequential scans away (RelayPlan).
SELECT o.seq, o.topic, o.event_id, o.event_key, o.event_type, o.part, o.payload, o.headers, o.digest, o.emitted_at
FROM unnest($1::integer[]) AS p(part)
CROSS JOIN LATERAL (
    SELECT x.seq, x.topic, x.event_id, x.event_key, x.event_type, x.part, x.payload, x.headers, x.digest, x.emitted_at
    FROM keel_events_outbox x
    WHERE x.part >= p.part AND x.part <= p.part AND x.published_at IS NULL
    ORDER BY x.part, x.seq
    LIMIT $2) o
ORDER BY o.seq
LIMIT $2;

-- name: OutboxPendingParts
-- Which of the partitions $1 have an unpublished event: the idle relay's
-- one probe for its parked lanes. The subquery is scalar with ORDER BY and
-- LIMIT 1 on purpose: it stays a probe of keel_events_outbox_pending_idx
-- (part, seq) per partition, the first entry of its range, and cannot be
-- turned into a join that reads the table. It needs no RelayPlan: the
-- ordered LIMIT 1 over a partition range is what the pending index alone
-- serves (EXPLAIN with and without statistics, 300,000 rows, a few or half
-- of them pending: an index-only probe per partition either way).
SELECT p.part
FROM unnest($1::integer[]) AS p(part)
WHERE (SELECT x.seq FROM keel_events_outbox x
       WHERE x.part >= p.part AND x.part <= p.part AND x.published_at IS NULL
       ORDER BY x.part, x.seq
       LIMIT 1) IS NOT NULL;

-- name: OutboxMark
-- Fenced: a row is marked only while its partition is held by this relay
-- ($3) at the fence it holds it with ($4[part+1]); returns the partition
-- of each row marked.
--
-- The lease is checked by a scalar subquery per row, not joined: joined,
-- the planner could drive the outbox from the lease by partition, and with
-- the outbox never analyzed (published_at IS NULL then estimated at 0.5%
-- of the rows) it did, reading every pending row of every partition: 27 s
-- per 500-row mark at 2,400,000 pending, against 26 ms for the 500 primary
-- key lookups it is now (with RelayPlan: otherwise a bitmap of the whole
-- pending index ANDed with the keys).
--
-- "(o.published_at IS NULL) IS TRUE" means "o.published_at IS NULL" but
-- cannot prove keel_events_outbox_pending_idx's predicate. Proved, the
-- index was usable, and with statistics taken while nothing was pending
-- (a quiet moment) it looked empty: the mark walked every pending row's
-- entry to find its 500 (123 ms per mark at 200,000 pending, even with
-- custom plans), so a burst slowed its own publishing.
UPDATE keel_events_outbox o SET published_at = $1, attempts = o.attempts + 1
WHERE o.seq = ANY($2::bigint[]) AND (o.published_at IS NULL) IS TRUE
  AND (SELECT l.fence FROM keel_events_relay_lease l WHERE l.part = o.part AND l.owner = $3) = ($4::bigint[])[o.part + 1]
RETURNING o.part;

-- name: OutboxAttempt
-- A publish that failed ($2 = 1 when its outcome is unknown). By primary
-- key, for the reason OutboxMark gives.
UPDATE keel_events_outbox SET attempts = attempts + 1, unknown = unknown + $2
WHERE seq = $1 AND (published_at IS NULL) IS TRUE;

-- name: OutboxArchive
-- Copies published events past the horizon to the archive...
INSERT INTO keel_events_archive (topic, event_id, event_key, event_type, digest, part, emitted_at,
                                 published_at, attempts, unknown, archived_at)
SELECT topic, event_id, event_key, event_type, digest, part, emitted_at, published_at, attempts, unknown, $2
FROM keel_events_outbox
WHERE published_at < $1
ORDER BY published_at
LIMIT $3
ON CONFLICT (topic, event_id) DO NOTHING;

-- name: OutboxArchived
-- ...then deletes what the archive holds.
DELETE FROM keel_events_outbox o
WHERE o.published_at < $1
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
FROM keel_events_outbox WHERE topic = $1 AND event_id = $2;

-- name: ArchiveGet
SELECT event_key, event_type, digest, part, emitted_at, published_at, attempts, unknown, archived_at
FROM keel_events_archive WHERE topic = $1 AND event_id = $2;

-- name: ArchiveList
-- The summaries reconciliation reads, by emit time.
SELECT topic, event_id, event_key, event_type, digest, emitted_at, published_at
FROM keel_events_archive
WHERE topic = $1 AND emitted_at >= $2 AND emitted_at < $3
ORDER BY emitted_at, event_id
LIMIT $4;
