-- Statements of bulk tasks (batches). Item counters are not written here:
-- triggers on keel_job keep the keel_batch_count ledger (migration 4).
-- A NULL "now" parameter means the database clock.

-- name: BatchInsert
-- $1 kind … $12 preview, $13 now.
INSERT INTO keel_batch (kind, name, reason, filter, filter_hash, snapshot_at, created_by, queue, rate,
                        autopause_failures, pause_on_key_pause, preview, created_at, updated_at)
VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9, $10, $11, $12::jsonb,
        coalesce($13::timestamptz, now()), coalesce($13::timestamptz, now()))
RETURNING id;

-- name: BatchGetMany
-- Batches by id with their counters summed from the ledger.
SELECT b.id, b.kind, b.name, b.reason, b.filter, b.filter_hash, b.snapshot_at, b.created_by, b.queue,
       b.rate, b.autopause_failures, b.pause_on_key_pause, b.preview, b.state, b.materialized,
       b.pause_reason, b.pause_context, b.last_error, b.created_at, b.started_at, b.paused_at,
       b.completed_at, b.updated_at,
       coalesce((SELECT jsonb_object_agg(c.bucket, c.n)
                 FROM (SELECT bucket, sum(n) AS n FROM keel_batch_count k
                       WHERE k.batch_id = b.id GROUP BY bucket) c), '{}'::jsonb) AS counts
FROM keel_batch b
WHERE b.id = ANY($1::bigint[])
ORDER BY b.id DESC;

-- name: BatchStateOf
SELECT state FROM keel_batch WHERE id = $1;

-- name: BatchList
-- Newest first along the primary key (or keel_batch_state_idx with a state
-- filter); $2 = 0 starts at the newest. NULL filters are off.
-- $1 states, $2 before id, $3 kind, $4 limit.
SELECT id
FROM keel_batch
WHERE ($1::text[] IS NULL OR state = ANY($1::text[]))
  AND ($2::bigint = 0 OR id < $2::bigint)
  AND ($3::text IS NULL OR kind = $3::text)
ORDER BY id DESC
LIMIT $4;

-- name: BatchTransition
-- One conditional UPDATE: the row moves only from one of $2 (states).
-- $1 id, $2 from states, $3 to, $4 pause reason, $5 pause context, $6 now.
UPDATE keel_batch
SET state = $3::text,
    started_at = CASE WHEN $3::text = 'running' THEN coalesce(started_at, coalesce($6::timestamptz, now()))
                      ELSE started_at END,
    paused_at = CASE WHEN $3::text = 'paused' THEN coalesce($6::timestamptz, now())
                     WHEN $3::text IN ('queued', 'running') THEN NULL ELSE paused_at END,
    pause_reason = CASE WHEN $3::text = 'paused' THEN $4::text
                        WHEN $3::text IN ('queued', 'running') THEN '' ELSE pause_reason END,
    pause_context = CASE WHEN $3::text = 'paused' THEN $5::jsonb
                         WHEN $3::text IN ('queued', 'running') THEN '{}'::jsonb ELSE pause_context END,
    completed_at = CASE WHEN $3::text IN ('completed', 'partial_completed', 'terminated')
                        THEN coalesce($6::timestamptz, now()) ELSE completed_at END,
    updated_at = coalesce($6::timestamptz, now())
WHERE id = $1 AND state = ANY($2::text[])
RETURNING id;

-- name: BatchLockForItems
SELECT state FROM keel_batch WHERE id = $1 FOR SHARE;

-- name: BatchItemsInsert
-- Set-based insert of one chunk. The conflict target is the partial unique
-- index (batch_id, subject): a subject already materialized is skipped.
-- $1 batch, $2 queue, $3 priority, $4 max attempts, $5 kinds, $6 subjects,
-- $7 flow keys, $8 args.
-- Runs between BatchBulkOn and BatchBulkOff, so the insert trigger leaves
-- these rows to the statement, which counts what it inserted (all queued)
-- into the ledger itself. Returns that count.
WITH ins AS (
    INSERT INTO keel_job (kind, queue, args, priority, max_attempts, flow_key, batch_id, subject)
    SELECT u.kind, $2::text, u.args::jsonb, $3::smallint, $4::integer, nullif(u.flow_key, ''), $1::bigint, u.subject
    FROM unnest($5::text[], $6::text[], $7::text[], $8::text[]) AS u(kind, subject, flow_key, args)
    ON CONFLICT (batch_id, subject) WHERE batch_id IS NOT NULL DO NOTHING
    RETURNING keel_batch_bucket(state, wait_reason, result) AS bucket
),
counted AS (
    INSERT INTO keel_batch_count (batch_id, bucket, n)
    SELECT $1::bigint, bucket, count(*) FROM ins GROUP BY bucket
)
SELECT count(*) FROM ins;

-- name: BatchBulkOn
SELECT set_config('keel.batch_bulk', 'on', true);

-- name: BatchBulkOff
SELECT set_config('keel.batch_bulk', 'off', true);

-- name: BatchSetMaterialized
UPDATE keel_batch SET materialized = true, updated_at = now() WHERE id = $1;

-- name: BatchTerminateItems
-- Items never claimed (fence 0) end as unprocessed, and so do items waiting
-- for a connection or for another channel's ACK (by the contract of those
-- waits, this item called nothing); anything else ever claimed (it may have
-- called the outside world) is left to finish.
UPDATE keel_job
SET state = 'cancelled',
    result = '{"reason":"batch_terminated"}'::jsonb,
    wait_reason = NULL,
    wait_deadline = NULL,
    finalized_at = coalesce($2::timestamptz, now())
WHERE batch_id = $1
  AND ((state IN ('available', 'scheduled') AND fence = 0)
       OR (state = 'waiting' AND wait_reason IN ('connection', 'external_ack')));

-- name: BatchStartReady
UPDATE keel_batch
SET state = 'running',
    started_at = coalesce(started_at, coalesce($1::timestamptz, now())),
    updated_at = coalesce($1::timestamptz, now())
WHERE state = 'queued' AND materialized
RETURNING id;

-- name: BatchFinishDone
-- The ledger says no item is live. Items only move from live buckets to
-- final ones (an operator's retry aside), so a batch seen with none live
-- stays so. The UPDATE re-checks state = 'running' on the locked row, so a
-- concurrent pause or terminate wins.
WITH c AS (
    SELECT b.id,
           coalesce(sum(k.n) FILTER (WHERE k.bucket IN ('queued', 'processing', 'waiting',
               'waiting_connection', 'waiting_external_ack', 'waiting_ack')), 0) AS live,
           coalesce(sum(k.n) FILTER (WHERE k.bucket = 'failed'), 0) AS failed
    FROM keel_batch b
    LEFT JOIN keel_batch_count k ON k.batch_id = b.id
    WHERE b.state = 'running' AND b.materialized
    GROUP BY b.id
)
UPDATE keel_batch b
SET state = CASE WHEN c.failed > 0 THEN 'partial_completed' ELSE 'completed' END,
    completed_at = coalesce($1::timestamptz, now()),
    updated_at = coalesce($1::timestamptz, now())
FROM c
WHERE b.id = c.id AND c.live = 0 AND b.state = 'running'
RETURNING b.id;

-- name: BatchCompact
-- Folds each batch's ledger rows into one per bucket. DELETE takes only the
-- rows visible to it, so rows appended meanwhile are kept; the sums move to
-- the new rows in the same statement, so readers see either the old rows or
-- the new ones, never neither.
WITH d AS (
    DELETE FROM keel_batch_count k
    WHERE k.batch_id IN (SELECT id FROM keel_batch WHERE state IN ('queued', 'running', 'paused')
                         UNION SELECT unnest($1::bigint[]))
    RETURNING k.batch_id, k.bucket, k.n
)
INSERT INTO keel_batch_count (batch_id, bucket, n)
SELECT batch_id, bucket, sum(n) FROM d GROUP BY batch_id, bucket HAVING sum(n) <> 0;

-- name: BatchRecount
SELECT keel_batch_bucket(state, wait_reason, result) AS bucket, count(*)
FROM keel_job
WHERE batch_id = $1
GROUP BY 1;

-- name: BatchCountAdjust
INSERT INTO keel_batch_count (batch_id, bucket, n)
SELECT $1::bigint, u.bucket, u.n FROM unnest($2::text[], $3::bigint[]) AS u(bucket, n) WHERE u.n <> 0;

-- name: BatchItems
-- Subject order along keel_job_batch_subject_idx (batch_id, subject).
-- NULL filters are off. $1 batch, $2 after subject, $3 outcome, $4 subject,
-- $5 text, $6 limit.
SELECT j.*
FROM keel_job j
WHERE j.batch_id = $1
  AND ($2::text IS NULL OR j.subject > $2::text)
  AND ($3::text IS NULL OR keel_batch_bucket(j.state, j.wait_reason, j.result) = $3::text)
  AND ($4::text IS NULL OR j.subject = $4::text)
  AND ($5::text IS NULL OR strpos(coalesce(j.wait_reason, '') || ' ' || coalesce(j.result::text, '') || ' '
                                  || j.errors::text, $5::text) > 0)
ORDER BY j.subject
LIMIT $6;

-- name: BatchSetLastError
UPDATE keel_batch SET last_error = $2, updated_at = now() WHERE id = $1;

-- name: BatchItemSettle
-- A batch item parked for its ACK (or made available by that wait's
-- deadline and not claimed since: the promotion keeps the wait fields) ends
-- without another run. The state condition makes it race-free against a
-- claim, a wake or another settle.
UPDATE keel_job j
SET state = $2,
    result = coalesce($3::jsonb, j.result),
    errors = CASE WHEN $4::jsonb IS NULL THEN j.errors
                  ELSE j.errors || jsonb_build_array(
                      jsonb_build_object('attempt', j.attempt, 'fence', j.fence, 'at', coalesce($5::timestamptz, now()))
                      || $4::jsonb)
             END,
    wait_reason = NULL,
    wait_deadline = NULL,
    needs_check = false,
    finalized_at = coalesce($5::timestamptz, now())
WHERE j.id = $1
  AND j.batch_id IS NOT NULL
  AND j.state IN ('waiting', 'available')
  AND j.wait_reason = 'ack'
RETURNING coalesce(j.flow_key, ''), j.queue;
