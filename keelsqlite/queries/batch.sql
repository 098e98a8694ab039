-- Statements of bulk tasks (batches). Item counters are not written here:
-- triggers on keel_job keep keel_batch_count (migration 4). Timestamps are
-- unix microseconds computed by the caller. The bucket CASE below is the
-- triggers' expression over the alias j; keep them identical.

-- name: BatchInsert
INSERT INTO keel_batch (kind, name, reason, filter, filter_hash, snapshot_at, created_by, queue, rate,
    autopause_failures, pause_on_key_pause, preview, created_at, updated_at)
VALUES (:kind, :name, :reason, json(:filter), :filter_hash, :snapshot_at, :created_by, :queue, :rate,
    :autopause_failures, :pause_on_key_pause, json(:preview), :now, :now)
RETURNING id;

-- name: BatchGet
SELECT b.id, b.kind, b.name, b.reason, b.filter, b.filter_hash, b.snapshot_at, b.created_by, b.queue,
    b.rate, b.autopause_failures, b.pause_on_key_pause, b.preview, b.state, b.materialized,
    b.pause_reason, b.pause_context, b.last_error, b.created_at, b.started_at, b.paused_at,
    b.completed_at, b.updated_at,
    coalesce((SELECT json_group_object(c.bucket, c.n) FROM keel_batch_count AS c WHERE c.batch_id = b.id), '{}')
FROM keel_batch AS b
WHERE b.id = :id;

-- name: BatchStateOf
SELECT state FROM keel_batch WHERE id = :id;

-- name: BatchList
-- Newest first; :states is a JSON array or NULL (no filter); :before 0
-- starts at the newest.
SELECT id FROM keel_batch
WHERE (:states IS NULL OR state IN (SELECT value FROM json_each(:states)))
  AND (:before = 0 OR id < :before)
  AND (:kind IS NULL OR kind = :kind)
ORDER BY id DESC
LIMIT :limit;

-- name: BatchTransition
-- One conditional UPDATE: the row moves only from one of :from (JSON array).
UPDATE keel_batch
SET state = :to,
    started_at = CASE WHEN :to = 'running' THEN coalesce(started_at, :now) ELSE started_at END,
    paused_at = CASE WHEN :to = 'paused' THEN :now WHEN :to IN ('queued', 'running') THEN NULL ELSE paused_at END,
    pause_reason = CASE WHEN :to = 'paused' THEN :pause_reason
                        WHEN :to IN ('queued', 'running') THEN '' ELSE pause_reason END,
    pause_context = CASE WHEN :to = 'paused' THEN json(:pause_context)
                         WHEN :to IN ('queued', 'running') THEN '{}' ELSE pause_context END,
    completed_at = CASE WHEN :to IN ('completed', 'partial_completed', 'terminated') THEN :now ELSE completed_at END,
    updated_at = :now
WHERE id = :id AND state IN (SELECT value FROM json_each(:from))
RETURNING id;

-- name: BatchItemInsert
-- One item; a subject already in the batch is skipped.
INSERT INTO keel_job (kind, queue, args, metadata, state, priority, run_at, max_attempts,
    flow_key, batch_id, subject, created_at)
VALUES (:kind, :queue, json(:args), '{}', 'available', :priority, :now, :max_attempts,
    nullif(:flow_key, ''), :batch_id, :subject, :now)
ON CONFLICT (batch_id, subject) WHERE batch_id IS NOT NULL DO NOTHING;

-- name: BatchSetMaterialized
UPDATE keel_batch SET materialized = 1, updated_at = :now WHERE id = :id;

-- name: BatchTerminateItems
-- Items never claimed (fence 0) end as unprocessed, and so do items waiting
-- for a connection or another channel's ACK (they called nothing); anything
-- else ever claimed is left to finish.
UPDATE keel_job
SET state = 'cancelled',
    result = '{"reason":"batch_terminated"}',
    wait_reason = NULL,
    wait_deadline = NULL,
    finalized_at = :now
WHERE batch_id = :id
  AND ((state IN ('available', 'scheduled') AND fence = 0)
       OR (state = 'waiting' AND wait_reason IN ('connection', 'external_ack')));

-- name: BatchStartReady
UPDATE keel_batch
SET state = 'running', started_at = coalesce(started_at, :now), updated_at = :now
WHERE state = 'queued' AND materialized = 1
RETURNING id;

-- name: BatchFinishDone
-- One writer: the counts read here cannot change before the UPDATE.
UPDATE keel_batch
SET state = CASE WHEN coalesce((SELECT n FROM keel_batch_count AS c
                                WHERE c.batch_id = keel_batch.id AND c.bucket = 'failed'), 0) > 0
                 THEN 'partial_completed' ELSE 'completed' END,
    completed_at = :now,
    updated_at = :now
WHERE state = 'running' AND materialized = 1
  AND coalesce((SELECT sum(n) FROM keel_batch_count AS c
                WHERE c.batch_id = keel_batch.id
                  AND c.bucket IN ('queued', 'processing', 'waiting', 'waiting_connection',
                                   'waiting_external_ack', 'waiting_ack')), 0) = 0
RETURNING id;

-- name: BatchRecount
SELECT CASE j.state
        WHEN 'running' THEN 'processing' WHEN 'unknown' THEN 'processing'
        WHEN 'waiting' THEN CASE j.wait_reason WHEN 'connection' THEN 'waiting_connection'
            WHEN 'external_ack' THEN 'waiting_external_ack' WHEN 'ack' THEN 'waiting_ack' ELSE 'waiting' END
        WHEN 'completed' THEN 'success' WHEN 'failed' THEN 'failed' WHEN 'manual' THEN 'failed'
        WHEN 'skipped' THEN 'skipped'
        WHEN 'cancelled' THEN CASE WHEN json_valid(j.result) AND j.result ->> '$.reason' = 'batch_terminated'
            THEN 'unprocessed' ELSE 'failed' END
        ELSE 'queued' END AS bucket, count(*)
FROM keel_job AS j
WHERE j.batch_id = :id
GROUP BY 1;

-- name: BatchCountAdjust
INSERT INTO keel_batch_count (batch_id, bucket, n) VALUES (:id, :bucket, :n)
ON CONFLICT (batch_id, bucket) DO UPDATE SET n = n + excluded.n;

-- name: BatchItems
-- Subject order along keel_job_batch_subject_idx (batch_id, subject). NULL
-- filters are off.
SELECT j.id, j.kind, j.queue, j.args, j.metadata, j.state, j.priority, j.run_at, j.attempt, j.max_attempts,
    j.fence, j.lease_owner, j.lease_expires_at, j.idempotency_key, j.flow_key, j.batch_id, j.subject,
    j.wait_reason, j.wait_deadline, j.needs_check, j.cancel_requested, j.result, j.errors, j.created_at,
    j.attempted_at, j.finalized_at
FROM keel_job AS j INDEXED BY keel_job_batch_subject_idx
WHERE j.batch_id = :id
  AND (:after IS NULL OR j.subject > :after)
  AND (:outcome IS NULL OR (CASE j.state
        WHEN 'running' THEN 'processing' WHEN 'unknown' THEN 'processing'
        WHEN 'waiting' THEN CASE j.wait_reason WHEN 'connection' THEN 'waiting_connection'
            WHEN 'external_ack' THEN 'waiting_external_ack' WHEN 'ack' THEN 'waiting_ack' ELSE 'waiting' END
        WHEN 'completed' THEN 'success' WHEN 'failed' THEN 'failed' WHEN 'manual' THEN 'failed'
        WHEN 'skipped' THEN 'skipped'
        WHEN 'cancelled' THEN CASE WHEN json_valid(j.result) AND j.result ->> '$.reason' = 'batch_terminated'
            THEN 'unprocessed' ELSE 'failed' END
        ELSE 'queued' END) = :outcome)
  AND (:subject IS NULL OR j.subject = :subject)
  AND (:text IS NULL OR instr(coalesce(j.wait_reason, '') || ' ' || coalesce(j.result, '') || ' ' || j.errors,
                              :text) > 0)
ORDER BY j.subject
LIMIT :limit;

-- name: BatchSetLastError
UPDATE keel_batch SET last_error = :msg, updated_at = :now WHERE id = :id;

-- name: BatchItemSettle
-- A batch item parked for its ACK (or made available by that wait's
-- deadline and not claimed since: the promotion keeps the wait fields) ends
-- without another run; the state condition makes it race-free.
UPDATE keel_job
SET state = :state,
    result = coalesce(json(:result), result),
    errors = CASE WHEN :err_class IS NULL THEN errors ELSE json_insert(errors, '$[#]', json_object(
        'attempt', attempt,
        'fence', fence,
        'class', :err_class,
        'message', :err_message,
        'at', :err_at)) END,
    wait_reason = NULL,
    wait_deadline = NULL,
    needs_check = 0,
    finalized_at = :now
WHERE id = :id
  AND batch_id IS NOT NULL
  AND state IN ('waiting', 'available')
  AND wait_reason = 'ack'
RETURNING coalesce(flow_key, ''), queue;
