-- Statements on keel_job. Parameters are named (:name); timestamps are unix
-- microseconds computed by the caller. Every RETURNING / SELECT list is the
-- same column list, in the order scanJob reads it.

-- name: JobInsert
-- One row of JobInsertMany. A duplicate idempotency key inserts nothing and
-- returns no row; the caller then reads the original with JobGetByIdempotency.
INSERT INTO keel_job (kind, queue, args, metadata, state, priority, run_at, max_attempts,
    idempotency_key, flow_key, batch_id, subject, created_at)
VALUES (:kind, :queue, json(:args), json(:metadata),
    CASE WHEN :run_at > :now THEN 'scheduled' ELSE 'available' END,
    :priority, :run_at, :max_attempts, :idempotency_key, :flow_key, :batch_id, :subject, :now)
ON CONFLICT (kind, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id, kind, queue, args, metadata, state, priority, run_at, attempt, max_attempts, fence,
    lease_owner, lease_expires_at, idempotency_key, flow_key, batch_id, subject, wait_reason,
    wait_deadline, needs_check, cancel_requested, result, errors, created_at, attempted_at, finalized_at;

-- name: JobInsertClaimed
-- One job inserted already claimed by :owner (keeldriver.InsertClaimer):
-- the columns a claim sets (JobClaim) are set here, so the insert's commit
-- is the claim's. A paused queue inserts nothing (no row returned).
INSERT INTO keel_job (kind, queue, args, metadata, state, priority, run_at, max_attempts, subject,
    attempt, fence, lease_owner, lease_expires_at, attempted_at, created_at)
SELECT :kind, :queue, json(:args), json(:metadata), 'running', :priority, :now, :max_attempts, :subject,
    1, 1, :owner, :lease_expires_at, :now, :now
WHERE NOT EXISTS (SELECT 1 FROM keel_queue q WHERE q.name = :queue AND q.paused_at IS NOT NULL)
RETURNING id, kind, queue, args, metadata, state, priority, run_at, attempt, max_attempts, fence,
    lease_owner, lease_expires_at, idempotency_key, flow_key, batch_id, subject, wait_reason,
    wait_deadline, needs_check, cancel_requested, result, errors, created_at, attempted_at, finalized_at;

-- name: JobGetByIdempotency
SELECT id, kind, queue, args, metadata, state, priority, run_at, attempt, max_attempts, fence,
    lease_owner, lease_expires_at, idempotency_key, flow_key, batch_id, subject, wait_reason,
    wait_deadline, needs_check, cancel_requested, result, errors, created_at, attempted_at, finalized_at
FROM keel_job
WHERE kind = :kind AND idempotency_key = :idempotency_key;

-- name: JobClaim
-- One statement: SQLite's single writer makes the select-then-update atomic,
-- so no SKIP LOCKED is needed. A paused queue row makes the subquery empty.
UPDATE keel_job
SET state = 'running',
    attempt = attempt + 1,
    fence = fence + 1,
    lease_owner = :owner,
    lease_expires_at = :lease_expires_at,
    attempted_at = :now
WHERE id IN (
    SELECT id FROM keel_job
    WHERE state = 'available' AND queue = :queue
      AND NOT EXISTS (SELECT 1 FROM keel_queue q WHERE q.name = :queue AND q.paused_at IS NOT NULL)
      AND (batch_id IS NULL OR NOT EXISTS (SELECT 1 FROM keel_batch AS b WHERE b.id = keel_job.batch_id
           AND (b.state IN ('queued', 'paused') OR (b.state = 'terminated' AND keel_job.fence = 0))))
    ORDER BY priority, id
    LIMIT :max
)
RETURNING id, kind, queue, args, metadata, state, priority, run_at, attempt, max_attempts, fence,
    lease_owner, lease_expires_at, idempotency_key, flow_key, batch_id, subject, wait_reason,
    wait_deadline, needs_check, cancel_requested, result, errors, created_at, attempted_at, finalized_at;

-- name: JobHeartbeat
-- :pairs is a JSON array of [id, fence] pairs: one statement for the batch.
-- The unary + keeps the planner off keel_job_state_idx: the pairs drive the
-- loop and each row is found by primary key.
UPDATE keel_job
SET lease_expires_at = :lease_expires_at
FROM (SELECT value ->> 0 AS id, value ->> 1 AS fence FROM json_each(:pairs)) AS u
WHERE keel_job.id = u.id AND keel_job.fence = u.fence
  AND +keel_job.state = 'running' AND keel_job.lease_owner = :owner
RETURNING keel_job.id;

-- name: JobFinish
-- One row of JobFinishMany, fenced in the WHERE. The error entry is built
-- here so that its fence is the row's and its attempt defaults to the row's.
UPDATE keel_job
SET state = :state,
    lease_owner = NULL,
    lease_expires_at = NULL,
    cancel_requested = 0,
    finalized_at = CASE WHEN :state IN ('completed', 'failed', 'cancelled', 'skipped') THEN :now END,
    errors = CASE WHEN :err_class IS NULL THEN errors ELSE json_insert(errors, '$[#]', json_object(
        'attempt', coalesce(:err_attempt, attempt),
        'fence', fence,
        'class', :err_class,
        'message', :err_message,
        'at', :err_at)) END,
    attempt = max(attempt + :attempt_delta, 0),
    run_at = CASE WHEN :state IN ('retryable', 'scheduled', 'available', 'unknown') THEN :run_at ELSE run_at END,
    result = coalesce(json(:result), result),
    wait_reason = :wait_reason,
    wait_deadline = :wait_deadline,
    needs_check = :needs_check
WHERE id = :id AND fence = :fence AND state = 'running'
RETURNING id;

-- name: JobCurrent
-- Why a conditional statement did not apply: the row's state and fence now.
SELECT state, fence FROM keel_job WHERE id = :id;

-- name: JobPromote
-- Due scheduled/retryable/unknown jobs keep run_at and needs_check; expired
-- waits keep their wait reason and deadline so the worker can tell, and
-- become due at the deadline. INDEXED BY: without ANALYZE statistics the
-- planner prefers keel_job_state_idx, which would read every future
-- scheduled job on each tick instead of only the due ones.
UPDATE keel_job
SET state = 'available',
    run_at = CASE WHEN state = 'waiting' THEN wait_deadline ELSE run_at END
WHERE id IN (
    SELECT id FROM (
        SELECT id FROM keel_job INDEXED BY keel_job_due_idx
        WHERE state IN ('scheduled', 'retryable', 'unknown') AND run_at <= :now
        UNION ALL
        SELECT id FROM keel_job INDEXED BY keel_job_wait_idx
        WHERE state = 'waiting' AND wait_deadline <= :now
    )
    LIMIT :max
)
RETURNING queue;

-- name: JobRescue
-- Expired leases: the side effect may have happened, so the job comes back
-- with needs_check (or goes to manual when its budget is spent). SET sees the
-- old row, so the message names the owner that lost the lease.
UPDATE keel_job
SET state = CASE WHEN attempt >= max_attempts THEN 'manual' ELSE 'available' END,
    needs_check = 1,
    lease_owner = NULL,
    lease_expires_at = NULL,
    errors = json_insert(errors, '$[#]', json_object(
        'attempt', attempt,
        'fence', fence,
        'class', 'lease_expired',
        'message', 'lease expired (owner ' || coalesce(lease_owner, '') || ')',
        'at', :at))
WHERE id IN (
    SELECT id FROM keel_job INDEXED BY keel_job_lease_idx
    WHERE state = 'running' AND lease_expires_at < :now
    ORDER BY lease_expires_at
    LIMIT :max
)
RETURNING id, kind, queue, args, metadata, state, priority, run_at, attempt, max_attempts, fence,
    lease_owner, lease_expires_at, idempotency_key, flow_key, batch_id, subject, wait_reason,
    wait_deadline, needs_check, cancel_requested, result, errors, created_at, attempted_at, finalized_at;

-- name: JobCancel
-- A running job only gets the request (its owner stops it); any other
-- non-final job is cancelled at once. Final rows do not match.
UPDATE keel_job
SET state = CASE WHEN state = 'running' THEN state ELSE 'cancelled' END,
    cancel_requested = CASE WHEN state = 'running' THEN 1 ELSE cancel_requested END,
    finalized_at = CASE WHEN state = 'running' THEN finalized_at ELSE :now END
WHERE id = :id AND state NOT IN ('completed', 'failed', 'cancelled', 'skipped')
RETURNING id, kind, queue, args, metadata, state, priority, run_at, attempt, max_attempts, fence,
    lease_owner, lease_expires_at, idempotency_key, flow_key, batch_id, subject, wait_reason,
    wait_deadline, needs_check, cancel_requested, result, errors, created_at, attempted_at, finalized_at;

-- name: JobRetry
UPDATE keel_job
SET state = 'available',
    run_at = :now,
    finalized_at = NULL,
    needs_check = 0,
    cancel_requested = 0,
    wait_reason = NULL,
    wait_deadline = NULL,
    max_attempts = max(max_attempts, attempt + 1)
WHERE id = :id
  AND state IN ('manual', 'failed', 'cancelled', 'retryable', 'waiting', 'unknown', 'scheduled', 'skipped')
RETURNING id, kind, queue, args, metadata, state, priority, run_at, attempt, max_attempts, fence,
    lease_owner, lease_expires_at, idempotency_key, flow_key, batch_id, subject, wait_reason,
    wait_deadline, needs_check, cancel_requested, result, errors, created_at, attempted_at, finalized_at;

-- name: JobDelete
DELETE FROM keel_job
WHERE id = :id AND state <> 'running'
RETURNING id, kind, queue, args, metadata, state, priority, run_at, attempt, max_attempts, fence,
    lease_owner, lease_expires_at, idempotency_key, flow_key, batch_id, subject, wait_reason,
    wait_deadline, needs_check, cancel_requested, result, errors, created_at, attempted_at, finalized_at;

-- name: JobWakeIDs
-- :ids is a JSON array of job ids, looked up by primary key (see the + in
-- JobHeartbeat), narrowed by :flow_key and :wait_reason when not empty.
UPDATE keel_job
SET state = 'available', run_at = :now, wait_reason = NULL, wait_deadline = NULL
WHERE +state = 'waiting' AND id IN (SELECT value FROM json_each(:ids))
  AND (:flow_key = '' OR flow_key = :flow_key)
  AND (:wait_reason = '' OR wait_reason = :wait_reason)
RETURNING id;

-- name: JobWakeFlow
-- An empty :wait_reason wakes every waiting job of the flow key.
UPDATE keel_job
SET state = 'available', run_at = :now, wait_reason = NULL, wait_deadline = NULL
WHERE state = 'waiting' AND flow_key = :flow_key
  AND (:wait_reason = '' OR wait_reason = :wait_reason)
RETURNING id;

-- name: JobGet
SELECT id, kind, queue, args, metadata, state, priority, run_at, attempt, max_attempts, fence,
    lease_owner, lease_expires_at, idempotency_key, flow_key, batch_id, subject, wait_reason,
    wait_deadline, needs_check, cancel_requested, result, errors, created_at, attempted_at, finalized_at
FROM keel_job
WHERE id = :id;

-- name: JobListAsc
-- Filters are NULL when unset; list filters are JSON arrays. The id bounds
-- are always set (0 and max int64 when open) so the rowid range is usable.
SELECT id, kind, queue, args, metadata, state, priority, run_at, attempt, max_attempts, fence,
    lease_owner, lease_expires_at, idempotency_key, flow_key, batch_id, subject, wait_reason,
    wait_deadline, needs_check, cancel_requested, result, errors, created_at, attempted_at, finalized_at
FROM keel_job
WHERE id > :after_id AND id < :before_id
  AND (:states IS NULL OR state IN (SELECT value FROM json_each(:states)))
  AND (:kinds IS NULL OR kind IN (SELECT value FROM json_each(:kinds)))
  AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues)))
  AND (:flow_key IS NULL OR flow_key = :flow_key)
  AND (:batch_id IS NULL OR batch_id = :batch_id)
ORDER BY id
LIMIT :limit;

-- name: JobListDesc
SELECT id, kind, queue, args, metadata, state, priority, run_at, attempt, max_attempts, fence,
    lease_owner, lease_expires_at, idempotency_key, flow_key, batch_id, subject, wait_reason,
    wait_deadline, needs_check, cancel_requested, result, errors, created_at, attempted_at, finalized_at
FROM keel_job
WHERE id > :after_id AND id < :before_id
  AND (:states IS NULL OR state IN (SELECT value FROM json_each(:states)))
  AND (:kinds IS NULL OR kind IN (SELECT value FROM json_each(:kinds)))
  AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues)))
  AND (:flow_key IS NULL OR flow_key = :flow_key)
  AND (:batch_id IS NULL OR batch_id = :batch_id)
ORDER BY id DESC
LIMIT :limit;

-- name: JobPrune
-- Oldest first through keel_job_finalized_idx (forced, as in JobPromote), so
-- a bounded prune never sorts every final row.
DELETE FROM keel_job
WHERE id IN (
    SELECT id FROM keel_job INDEXED BY keel_job_finalized_idx
    WHERE finalized_at < :before
      AND state IN ('completed', 'failed', 'cancelled', 'skipped')
    ORDER BY finalized_at
    LIMIT :max
);

-- name: JobFinalizedCounts
-- Two index ranges: keel_job_finalized_idx for the rows finalized in one
-- sample interval, however many finished rows the table holds, and
-- keel_job_manual_idx for jobs left needing an operator (not final, so
-- dated by their last attempt).
SELECT state, count(*)
FROM keel_job INDEXED BY keel_job_finalized_idx
WHERE finalized_at > :since AND finalized_at <= :until
GROUP BY state
UNION ALL
SELECT 'manual', count(*)
FROM keel_job INDEXED BY keel_job_manual_idx
WHERE state = 'manual' AND attempted_at > :since AND attempted_at <= :until;
