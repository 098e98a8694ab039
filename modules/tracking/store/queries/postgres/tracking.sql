-- name: SecurityCount
INSERT INTO tracking_security (carrier, reason, count, last_at) VALUES ($1, $2, 1, $3)
ON CONFLICT (carrier, reason) DO UPDATE SET count = tracking_security.count + 1, last_at = excluded.last_at;

-- name: SecurityList
SELECT carrier, reason, count, last_at FROM tracking_security ORDER BY carrier, reason;

-- name: MappingVersionInsert
INSERT INTO tracking_mapping_version (carrier, version, state, note, created_at, created_by)
SELECT $1, coalesce(max(version), 0) + 1, 'draft', $2, $3, $4 FROM tracking_mapping_version WHERE carrier = $1
RETURNING version;

-- name: MappingVersionInsertInitial
-- The first version from configuration: every instance starting at once
-- tries it, and only the first one inserts (the others find it there).
INSERT INTO tracking_mapping_version (carrier, version, state, note, created_at, created_by)
VALUES ($1, 1, 'draft', $2, $3, $4)
ON CONFLICT (carrier, version) DO NOTHING
RETURNING version;

-- name: MappingCodeInsert
INSERT INTO tracking_mapping (carrier, version, code, milestone) VALUES ($1, $2, $3, $4);

-- name: MappingActiveVersion
SELECT version FROM tracking_mapping_version WHERE carrier = $1 AND state = 'active';

-- name: MappingCodes
SELECT code, milestone FROM tracking_mapping WHERE carrier = $1 AND version = $2 ORDER BY code;

-- name: MappingVersions
SELECT carrier, version, state, note, created_at, created_by, activated_at, activated_by
FROM tracking_mapping_version WHERE carrier = $1 ORDER BY version DESC;

-- name: MappingVersionGet
SELECT carrier, version, state, note, created_at, created_by, activated_at, activated_by
FROM tracking_mapping_version WHERE carrier = $1 AND version = $2;

-- name: MappingRetireActive
UPDATE tracking_mapping_version SET state = 'retired' WHERE carrier = $1 AND state = 'active';

-- name: MappingActivate
UPDATE tracking_mapping_version SET state = 'active', activated_at = $3, activated_by = $4
WHERE carrier = $1 AND version = $2 AND state = 'draft';

-- name: RawResult
UPDATE tracking_raw_event SET outcome = $2, milestone = $3, mapping_version = $4, revision = $5, processed_at = $6 WHERE id = $1;

-- name: RawTimeline
SELECT id, idem_key, source_event_id, seq, code, occurred_raw, occurred_at, time_trusted, location, payload, via,
    received_at, outcome, milestone, mapping_version, revision
FROM tracking_raw_event WHERE carrier = $1 AND waybill = $2
ORDER BY CASE WHEN seq > 0 THEN seq ELSE 0 END, occurred_at NULLS LAST, id;

-- name: RawUnmapped
SELECT id, waybill, idem_key, seq, code, occurred_at, time_trusted FROM tracking_raw_event
WHERE carrier = $1 AND outcome = 'unmapped' AND id > $2 ORDER BY id LIMIT $3;

-- name: ReplayEvents
SELECT waybill, idem_key, seq, code, occurred_at, time_trusted FROM tracking_raw_event
WHERE carrier = $1 AND waybill > $2 AND waybill <= $3 AND outcome NOT IN ('collision')
ORDER BY waybill, id;

-- name: ReplayWaybillPage
SELECT waybill, milestone, seq, event_key, revision FROM tracking_waybill WHERE carrier = $1 AND waybill > $2 ORDER BY waybill LIMIT $3;

-- name: CollisionInsert
INSERT INTO tracking_collision (carrier, idem_key, first_raw_id, waybill, payload, core_digest, via, received_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (carrier, idem_key, core_digest) DO NOTHING;

-- name: CollisionList
SELECT c.id, c.carrier, c.idem_key, c.waybill, r.payload, c.payload, c.received_at, r.received_at
FROM tracking_collision c JOIN tracking_raw_event r ON r.id = c.first_raw_id
WHERE ($1 = '' OR c.carrier = $1) AND ($2 = '' OR c.waybill = $2) ORDER BY c.id DESC LIMIT $3;

-- name: WaybillGet
SELECT carrier, waybill, milestone, seq, occurred_at, time_trusted, event_key, revision, mapping_version, events,
    first_seen_at, updated_at, last_event_at, verified_at
FROM tracking_waybill WHERE carrier = $1 AND waybill = $2;

-- name: WaybillVerified
-- A full answer of the carrier: when it was read and what it reports as
-- latest.
UPDATE tracking_waybill SET verified_at = $3, carrier_milestone = $4, carrier_seq = $5, carrier_event_key = $6
WHERE carrier = $1 AND waybill = $2;

-- name: WaybillSearch
SELECT carrier, waybill, milestone, seq, occurred_at, time_trusted, event_key, revision, mapping_version, events,
    first_seen_at, updated_at, last_event_at, verified_at
FROM tracking_waybill WHERE ($1 = '' OR waybill LIKE $1 || '%') AND ($2 = '' OR carrier = $2)
ORDER BY last_event_at DESC, carrier, waybill LIMIT $3;

-- name: GapIsOpen
SELECT EXISTS (SELECT 1 FROM tracking_gap WHERE carrier = $1 AND waybill = $2 AND seq = $3 AND closed_at IS NULL);

-- name: GapsOf
SELECT seq, opened_at, closed_at, coalesce(closed_raw_id, 0) FROM tracking_gap WHERE carrier = $1 AND waybill = $2 ORDER BY seq;

-- name: GapOpenCounts
SELECT carrier, count(*), min(opened_at) FROM tracking_gap WHERE closed_at IS NULL GROUP BY carrier;

-- name: GapOpenList
SELECT carrier, waybill, seq, opened_at FROM tracking_gap WHERE closed_at IS NULL AND ($1 = '' OR carrier = $1)
ORDER BY opened_at, carrier, waybill, seq LIMIT $2;

-- name: ReconWaybills
-- A page of waybills with what reconciliation compares: the aggregate, its
-- open gaps at the cutoff, the highest trusted sequence held as evidence,
-- applied regressions (an advance to a lower sequence after a higher one),
-- how many advances the evidence records, and the carrier's last answer.
SELECT w.carrier, w.waybill, w.milestone, w.seq, w.revision, w.event_key,
    (SELECT count(*) FROM tracking_gap g WHERE g.carrier = w.carrier AND g.waybill = w.waybill AND g.closed_at IS NULL AND g.opened_at <= $2),
    coalesce((SELECT max(r.seq) FROM tracking_raw_event r WHERE r.carrier = w.carrier AND r.waybill = w.waybill
        AND r.outcome IN ('advanced', 'detail') AND r.received_at <= $2), 0),
    (SELECT count(*) FROM tracking_raw_event a JOIN tracking_raw_event b
        ON b.carrier = a.carrier AND b.waybill = a.waybill AND b.outcome = 'advanced' AND a.outcome = 'advanced'
        AND a.revision < b.revision AND a.seq > b.seq AND b.seq > 0
     WHERE a.carrier = w.carrier AND a.waybill = w.waybill),
    (SELECT count(*) FROM tracking_raw_event r WHERE r.carrier = w.carrier AND r.waybill = w.waybill AND r.outcome = 'advanced'),
    w.last_event_at, w.updated_at, w.verified_at, w.carrier_milestone, w.carrier_seq, w.carrier_event_key
FROM tracking_waybill w WHERE w.carrier = $1 AND w.first_seen_at <= $2 AND w.waybill > $3
ORDER BY w.waybill LIMIT $4;

-- name: ReconEvidence
-- The applied evidence of a page of waybills (a range of waybill numbers),
-- each event with the milestone it was applied under: folding it must give
-- the aggregate. Events that advance nothing by rule (unordered, unmapped,
-- collisions) are not evidence of the current state.
SELECT waybill, idem_key, seq, milestone, occurred_at, time_trusted FROM tracking_raw_event
WHERE carrier = $1 AND waybill > $2 AND waybill <= $3 AND outcome IN ('advanced', 'detail') AND received_at <= $4
ORDER BY waybill, id;

-- name: ReplayInsert
INSERT INTO tracking_replay (carrier, version, base_version, created_at, created_by, waybills, changed, diff)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id;

-- name: ReplayList
SELECT id, carrier, version, base_version, created_at, created_by, waybills, changed, diff
FROM tracking_replay WHERE carrier = $1 ORDER BY id DESC LIMIT $2;

-- name: ReplayLatest
SELECT id, carrier, version, base_version, created_at, created_by, waybills, changed, diff
FROM tracking_replay WHERE carrier = $1 AND version = $2 ORDER BY id DESC LIMIT 1;

-- Set-based ingestion: one statement per table for a whole push, so a push
-- costs a handful of round trips however many events it carries. Record
-- sets come as one JSON array argument (json_to_recordset), lists as
-- native arrays.

-- name: RawExisting
-- The stored events among a push's keys (duplicates and collisions).
SELECT idem_key, id, core_digest, outcome, milestone, mapping_version, revision FROM tracking_raw_event
WHERE carrier = $1 AND idem_key = ANY($2::text[]);

-- name: WaybillLock
-- Creates the waybills seen first and locks every waybill of the push for
-- the rest of the transaction, in one order (by waybill) so that two pushes
-- sharing waybills wait for each other instead of deadlocking; returns the
-- aggregates as they are under the lock.
INSERT INTO tracking_waybill (carrier, waybill, first_seen_at, last_event_at, events)
SELECT $1, w, $2, $2, 0 FROM unnest($3::text[]) AS w ORDER BY w
ON CONFLICT (carrier, waybill) DO UPDATE SET events = tracking_waybill.events
RETURNING carrier, waybill, milestone, seq, occurred_at, time_trusted, event_key, revision, mapping_version, events,
    first_seen_at, updated_at, last_event_at, verified_at;

-- name: RawInsertBatch
-- The evidence with its result, decided before the insert; a key stored
-- meanwhile by another transaction is not written (the caller then sees
-- fewer ids than events and decides again).
INSERT INTO tracking_raw_event (carrier, waybill, idem_key, source_event_id, seq, code, occurred_raw, occurred_at,
    time_trusted, location, payload, payload_digest, core_digest, via, received_at, outcome, milestone, mapping_version,
    revision, processed_at)
SELECT $1, r.waybill, r.key, r.source_id, r.seq, r.code, r.occurred_raw, r.occurred_at, r.time_trusted, r.location,
    r.payload, r.payload_digest, r.core_digest, $2, $3, r.outcome, r.milestone, r.mapping_version, r.revision, $3
FROM json_to_recordset($4::json) AS r(waybill text, key text, source_id text, seq bigint, code text, occurred_raw text,
    occurred_at timestamptz, time_trusted boolean, location text, payload text, payload_digest text, core_digest text,
    outcome text, milestone text, mapping_version integer, revision bigint)
ORDER BY r.key
ON CONFLICT (carrier, idem_key) DO NOTHING
RETURNING id, idem_key;

-- name: WaybillApply
-- Moves each locked aggregate from the revision it was read at to its new
-- state (conditional on that revision: a row moved meanwhile is not
-- returned) and counts the push's new events.
UPDATE tracking_waybill w SET milestone = u.milestone, seq = u.seq, occurred_at = u.occurred_at,
    time_trusted = u.time_trusted, event_key = u.event_key, revision = u.revision, mapping_version = u.mapping_version,
    updated_at = CASE WHEN u.revision > w.revision THEN $2 ELSE w.updated_at END,
    events = w.events + u.events,
    last_event_at = CASE WHEN u.events > 0 THEN $2 ELSE w.last_event_at END
FROM json_to_recordset($3::json) AS u(waybill text, from_revision bigint, milestone text, seq bigint,
    occurred_at timestamptz, time_trusted boolean, event_key text, revision bigint, mapping_version integer, events bigint)
WHERE w.carrier = $1 AND w.waybill = u.waybill AND w.revision = u.from_revision
RETURNING w.waybill;

-- name: GapOpenBatch
-- Skipped sequences become gaps unless their evidence is stored (this
-- push's own events are inserted before).
INSERT INTO tracking_gap (carrier, waybill, seq, opened_at)
SELECT $1, g.waybill, g.seq, $2 FROM json_to_recordset($3::json) AS g(waybill text, seq bigint)
WHERE NOT EXISTS (SELECT 1 FROM tracking_raw_event r WHERE r.carrier = $1 AND r.waybill = g.waybill AND r.seq = g.seq)
ORDER BY g.waybill, g.seq
ON CONFLICT (carrier, waybill, seq) DO NOTHING
RETURNING waybill, seq;

-- name: GapCloseBatch
-- Each gap is one primary-key probe. "(g.closed_at IS NULL) IS TRUE" means
-- the same as "g.closed_at IS NULL" but cannot prove tracking_gap_open_idx's
-- predicate: analyzed while no gap was open, the generic plan read every
-- open gap of the carrier by that index into a hash for the push's few
-- (117 ms per push at 300,000 open gaps), slowest exactly when a backlog
-- has opened many (TestPlansAfterAnalyze).
UPDATE tracking_gap g SET closed_at = $2, closed_raw_id = c.raw_id
FROM json_to_recordset($3::json) AS c(waybill text, seq bigint, raw_id bigint)
WHERE g.carrier = $1 AND g.waybill = c.waybill AND g.seq = c.seq AND (g.closed_at IS NULL) IS TRUE
RETURNING g.waybill, g.seq;
