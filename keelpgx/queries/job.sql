-- Statements on keel_job. Every statement returning jobs returns whole rows
-- (j.*); the driver scans them by column name, so later migrations may add
-- columns without breaking older statements.
--
-- Durations are bigint microseconds, multiplied by interval '1 microsecond'.
-- A NULL "now" parameter means the database clock.

-- name: JobInsertMany
-- Ids are drawn from the identity sequence up front so every input row knows
-- its id before the insert: that is what maps inserted rows back to input
-- order without relying on RETURNING order. The sequence is looked up once,
-- in an uncorrelated subquery (an init plan), and cast to regclass there:
-- nextval(pg_get_serial_sequence(...)) re-ran the catalog lookup and the
-- text-to-regclass cast for every row, about 40% of a 1,000-row insert.
WITH input AS (
    SELECT nextval((SELECT pg_get_serial_sequence('keel_job', 'id')::regclass)) AS id, u.*
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::smallint[], $6::timestamptz[],
                $7::integer[], $8::text[], $9::text[], $10::bigint[], $11::text[])
         WITH ORDINALITY AS u(kind, queue, args, metadata, priority, run_at, max_attempts,
                              idempotency_key, flow_key, batch_id, subject, ord)
),
inserted AS (
    INSERT INTO keel_job (id, kind, queue, args, metadata, state, priority, run_at, max_attempts,
                          idempotency_key, flow_key, batch_id, subject)
    OVERRIDING SYSTEM VALUE
    SELECT id, kind, queue, args::jsonb, metadata::jsonb,
           CASE WHEN coalesce(run_at, now()) > now() THEN 'scheduled' ELSE 'available' END,
           priority, coalesce(run_at, now()), max_attempts, idempotency_key, flow_key, batch_id, subject
    FROM input
    ORDER BY ord
    ON CONFLICT (kind, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING *
)
SELECT i.ord, false AS duplicate, j.*
FROM input i JOIN inserted j ON j.id = i.id
UNION ALL
-- A key repeated inside the batch: later copies return the first one.
SELECT i.ord, true, j.*
FROM input i JOIN inserted j
  ON j.kind = i.kind AND j.idempotency_key = i.idempotency_key AND j.id <> i.id
UNION ALL
-- A key stored before this statement (its snapshot cannot see "inserted").
SELECT i.ord, true, k.*
FROM input i JOIN keel_job k ON k.kind = i.kind AND k.idempotency_key = i.idempotency_key
WHERE NOT EXISTS (SELECT 1 FROM inserted x WHERE x.id = i.id);

-- name: JobInsertClaimed
-- One job inserted already claimed by $8 (keeldriver.InsertClaimer): the
-- columns a claim sets (JobClaim) are set here, so the insert's commit is
-- the claim's. A paused queue inserts nothing (no row returned).
-- $1 kind, $2 queue, $3 args, $4 metadata, $5 priority, $6 max attempts,
-- $7 subject, $8 owner, $9 lease (µs).
INSERT INTO keel_job (kind, queue, args, metadata, state, priority, run_at, max_attempts, subject,
                      attempt, fence, lease_owner, lease_expires_at, attempted_at)
SELECT $1::text, $2::text, $3::jsonb, $4::jsonb, 'running', $5::smallint, now(), $6::integer, $7::text,
       1, 1, $8::text, now() + $9::bigint * interval '1 microsecond', now()
WHERE NOT EXISTS (SELECT 1 FROM keel_queue q WHERE q.name = $2::text AND q.paused_at IS NOT NULL)
RETURNING *;

-- name: JobGetByIdempotencyKeys
-- Fallback for keys whose conflicting row committed after JobInsertMany's
-- snapshot was taken: a new statement sees it.
SELECT j.*
FROM keel_job j
JOIN unnest($1::text[], $2::text[]) AS u(kind, idempotency_key)
  ON j.kind = u.kind AND j.idempotency_key = u.idempotency_key;

-- name: JobClaim
-- Claims across all flow keys in (priority, id) order. The engine claims
-- per key with JobClaimKeys; this statement serves tools and tests.
-- The paused check is inside the statement so a pause takes effect on every
-- instance at its next claim. The update takes the picked ids as an array
-- for the reason given at JobClaimKeys.
WITH picked AS (
    SELECT id
    FROM keel_job
    WHERE state = 'available'
      AND queue = $1
      AND NOT EXISTS (SELECT 1 FROM keel_queue q WHERE q.name = $1 AND q.paused_at IS NOT NULL)
      AND (batch_id IS NULL OR NOT EXISTS (SELECT 1 FROM keel_batch b WHERE b.id = keel_job.batch_id
           AND (b.state IN ('queued', 'paused') OR (b.state = 'terminated' AND keel_job.fence = 0))))
    ORDER BY priority, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE keel_job j
SET state = 'running',
    attempt = j.attempt + 1,
    fence = j.fence + 1,
    lease_owner = $3,
    lease_expires_at = coalesce($5::timestamptz, now()) + $4::bigint * interval '1 microsecond',
    attempted_at = coalesce($5::timestamptz, now())
WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
RETURNING j.*;

-- name: JobHeartbeat
-- Addressed by id like JobFinishMany, and written the same way for the
-- same reason: "(j.state = 'running') IS TRUE" keeps the planner on the
-- primary key whatever the statistics say (see JobFinishMany).
UPDATE keel_job j
SET lease_expires_at = coalesce($4::timestamptz, now()) + $3::bigint * interval '1 microsecond'
FROM unnest($1::bigint[], $2::bigint[]) AS u(id, fence)
WHERE j.id = u.id
  AND j.fence = u.fence
  AND (j.state = 'running') IS TRUE
  AND j.lease_owner = $5
RETURNING j.id;

-- name: JobFinishMany
-- One statement for the whole batch. Each row applies only while the job is
-- still running under the fence the worker was given; RETURNING u.ord tells
-- which inputs applied. The error entry gets attempt, fence and at from the
-- row and the clock unless the caller set them (right-hand keys win in ||).
--
-- The state test is written "(j.state = 'running') IS TRUE", which means
-- the same (state is NOT NULL) but does not let the planner prove the
-- predicate of keel_job_running_idx. With "j.state = 'running'" it may: once
-- ANALYZE has sampled the table while few or no jobs were running (an idle
-- moment, or a backlog just inserted), the index is estimated at one row,
-- and the plan scans all of it and joins the batch by a nested loop with no
-- index, comparing every running job with every finished one. Measured on
-- a drain of 100,000 jobs analyzed after the insert: completions of ~800
-- jobs took 1.3-2.8 s each and the drain fell from 34,700 to 592 jobs/s.
-- Kept off that index, the only index the statement can use is the primary
-- key, one probe per finished job (TestPlansAfterAnalyze).
UPDATE keel_job j
SET state = u.state,
    run_at = CASE WHEN u.state IN ('retryable', 'scheduled', 'available', 'unknown')
                  THEN coalesce(u.run_at, u.at, now()) ELSE j.run_at END,
    result = coalesce(u.result::jsonb, j.result),
    errors = CASE WHEN u.error IS NULL THEN j.errors
                  ELSE j.errors || jsonb_build_array(
                      jsonb_build_object('attempt', j.attempt, 'fence', j.fence, 'at', coalesce(u.at, now()))
                      || u.error::jsonb)
             END,
    wait_reason = CASE WHEN u.state = 'waiting' THEN nullif(u.wait_reason, '') END,
    wait_deadline = CASE WHEN u.state = 'waiting' THEN u.wait_deadline END,
    attempt = greatest(j.attempt + u.attempt_delta, 0),
    needs_check = u.needs_check,
    cancel_requested = false,
    lease_owner = NULL,
    lease_expires_at = NULL,
    finalized_at = CASE WHEN u.state IN ('completed', 'failed', 'cancelled', 'skipped')
                        THEN coalesce(u.at, now()) END
FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::timestamptz[], $5::text[], $6::text[],
            $7::text[], $8::timestamptz[], $9::integer[], $10::boolean[], $11::timestamptz[])
     WITH ORDINALITY AS u(id, fence, state, run_at, result, error, wait_reason, wait_deadline,
                          attempt_delta, needs_check, at, ord)
WHERE j.id = u.id
  AND j.fence = u.fence
  AND (j.state = 'running') IS TRUE
RETURNING u.ord;

-- name: JobCurrentFences
-- Explains rejected finishes: the state and fence the jobs have now.
SELECT id, state, fence FROM keel_job WHERE id = ANY($1::bigint[]);

-- name: JobPromote
-- Due scheduled/retryable/unknown rows first (oldest run_at first), then
-- expired waits with what is left of the budget. Each subselect reads its own
-- partial index. An unknown job keeps needs_check = true so the worker runs
-- Check before a new attempt; a waiting job keeps its wait fields so the
-- worker can tell its deadline passed, and become due at the deadline.
WITH due AS (
    SELECT id
    FROM keel_job
    WHERE state IN ('scheduled', 'retryable', 'unknown')
      AND run_at <= coalesce($2::timestamptz, now())
    ORDER BY run_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
),
expired AS (
    SELECT id
    FROM keel_job
    WHERE state = 'waiting'
      AND wait_deadline <= coalesce($2::timestamptz, now())
    ORDER BY wait_deadline
    LIMIT greatest($1 - (SELECT count(*) FROM due), 0)
    FOR UPDATE SKIP LOCKED
),
moved AS (
    UPDATE keel_job j
    SET state = 'available',
        run_at = CASE WHEN j.state = 'waiting' THEN j.wait_deadline ELSE j.run_at END,
        needs_check = j.needs_check OR j.state = 'unknown'
    FROM (SELECT id FROM due UNION ALL SELECT id FROM expired) p
    WHERE j.id = p.id
    RETURNING j.queue
)
SELECT DISTINCT queue FROM moved ORDER BY queue;

-- name: JobRescue
-- The side effect of a job whose owner vanished may have happened, hence
-- needs_check. SET expressions read the old row, so the error entry records
-- the attempt, fence and owner that lost the lease.
WITH expired AS (
    SELECT id
    FROM keel_job
    WHERE state = 'running'
      AND lease_expires_at < coalesce($2::timestamptz, now())
    ORDER BY lease_expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE keel_job j
SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'manual' ELSE 'available' END,
    needs_check = true,
    lease_owner = NULL,
    lease_expires_at = NULL,
    errors = j.errors || jsonb_build_array(jsonb_build_object(
        'attempt', j.attempt,
        'fence', j.fence,
        'class', 'lease_expired',
        'message', 'lease expired (owner ' || coalesce(j.lease_owner, '') || ')',
        'at', coalesce($2::timestamptz, now())))
FROM expired
WHERE j.id = expired.id
RETURNING j.*;

-- name: JobCancel
-- One statement: the UPDATE decides; the second branch returns the row it
-- refused (final state) so the driver can say why, and nothing for a missing id.
WITH upd AS (
    UPDATE keel_job j
    SET state = CASE WHEN j.state = 'running' THEN 'running' ELSE 'cancelled' END,
        cancel_requested = (j.state = 'running'),
        finalized_at = CASE WHEN j.state = 'running' THEN NULL ELSE coalesce($2::timestamptz, now()) END
    WHERE j.id = $1
      AND j.state NOT IN ('completed', 'failed', 'cancelled', 'skipped')
    RETURNING j.*
)
SELECT true AS applied, upd.* FROM upd
UNION ALL
SELECT false, j.* FROM keel_job j WHERE j.id = $1 AND NOT EXISTS (SELECT 1 FROM upd);

-- name: JobRetry
-- The budget is extended by one when spent so the retried job gets exactly
-- one more attempt; the error history is kept.
WITH upd AS (
    UPDATE keel_job j
    SET state = 'available',
        run_at = coalesce($2::timestamptz, now()),
        finalized_at = NULL,
        needs_check = false,
        cancel_requested = false,
        wait_reason = NULL,
        wait_deadline = NULL,
        max_attempts = greatest(j.max_attempts, j.attempt + 1)
    WHERE j.id = $1
      AND j.state IN ('manual', 'failed', 'cancelled', 'retryable', 'waiting', 'unknown', 'scheduled', 'skipped')
    RETURNING j.*
)
SELECT true AS applied, upd.* FROM upd
UNION ALL
SELECT false, j.* FROM keel_job j WHERE j.id = $1 AND NOT EXISTS (SELECT 1 FROM upd);

-- name: JobDelete
-- A running job is refused: its owner would commit into a missing row.
WITH del AS (
    DELETE FROM keel_job WHERE id = $1 AND state <> 'running' RETURNING *
)
SELECT true AS applied, del.* FROM del
UNION ALL
SELECT false, j.* FROM keel_job j WHERE j.id = $1 AND NOT EXISTS (SELECT 1 FROM del);

-- name: JobWakeIDs
-- The jobs named by id, each looked up by primary key, narrowed by flow key
-- ($2) and wait reason ($3) when they are given. The state test is written
-- "(state = 'waiting') IS TRUE" so that it cannot prove the predicate of
-- keel_job_wait_idx or keel_job_wait_key_idx: statistics taken while no
-- job was waiting make those indexes look empty, and the generic plan a
-- pooled session switches to then walked every waiting job's index entry
-- to find the few named here (TestPlansAfterAnalyze).
UPDATE keel_job
SET state = 'available',
    run_at = coalesce($4::timestamptz, now()),
    wait_reason = NULL,
    wait_deadline = NULL
WHERE id = ANY($1::bigint[])
  AND (state = 'waiting') IS TRUE
  AND ($2::text IS NULL OR flow_key = $2::text)
  AND ($3::text IS NULL OR wait_reason = $3::text)
RETURNING id;

-- name: JobWakeFlow
-- Every waiting job of a flow key, or of its wait reason when $2 is given:
-- a range of keel_job_wait_key_idx.
UPDATE keel_job
SET state = 'available',
    run_at = coalesce($3::timestamptz, now()),
    wait_reason = NULL,
    wait_deadline = NULL
WHERE state = 'waiting'
  AND flow_key = $1::text
  AND ($2::text IS NULL OR wait_reason = $2::text)
RETURNING id;

-- name: JobGet
SELECT j.* FROM keel_job j WHERE j.id = $1;

-- name: JobListAsc
-- Two statements (ascending, descending) so each can walk the primary key in
-- order. NULL filters are off.
SELECT j.*
FROM keel_job j
WHERE ($1::text[] IS NULL OR j.state = ANY($1::text[]))
  AND ($2::text[] IS NULL OR j.kind = ANY($2::text[]))
  AND ($3::text[] IS NULL OR j.queue = ANY($3::text[]))
  AND ($4::text IS NULL OR j.flow_key = $4::text)
  AND ($5::bigint IS NULL OR j.batch_id = $5::bigint)
  AND ($6::bigint IS NULL OR j.id > $6::bigint)
  AND ($7::bigint IS NULL OR j.id < $7::bigint)
ORDER BY j.id
LIMIT $8;

-- name: JobListDesc
SELECT j.*
FROM keel_job j
WHERE ($1::text[] IS NULL OR j.state = ANY($1::text[]))
  AND ($2::text[] IS NULL OR j.kind = ANY($2::text[]))
  AND ($3::text[] IS NULL OR j.queue = ANY($3::text[]))
  AND ($4::text IS NULL OR j.flow_key = $4::text)
  AND ($5::bigint IS NULL OR j.batch_id = $5::bigint)
  AND ($6::bigint IS NULL OR j.id > $6::bigint)
  AND ($7::bigint IS NULL OR j.id < $7::bigint)
ORDER BY j.id DESC
LIMIT $8;

-- name: JobListKeyAsc
-- JobListAsc for one flow key ($4, required). keel_job_flow_key_idx holds
-- the key's jobs in id order but leaves running ones out (migration 9);
-- those come from keel_job_running_idx, never more than worker slots, and
-- the two ordered parts are merged. Without this, a key's page was the
-- primary key walked in order and filtered: every job of the table read to
-- fill the page of a key with few jobs.
SELECT u.*
FROM (
    (SELECT j.*
     FROM keel_job j
     WHERE j.flow_key = $4::text AND j.state <> 'running'
       AND ($1::text[] IS NULL OR j.state = ANY($1::text[]))
       AND ($2::text[] IS NULL OR j.kind = ANY($2::text[]))
       AND ($3::text[] IS NULL OR j.queue = ANY($3::text[]))
       AND ($5::bigint IS NULL OR j.batch_id = $5::bigint)
       AND ($6::bigint IS NULL OR j.id > $6::bigint)
       AND ($7::bigint IS NULL OR j.id < $7::bigint)
     ORDER BY j.id
     LIMIT $8)
    UNION ALL
    (SELECT j.*
     FROM keel_job j
     WHERE j.flow_key = $4::text AND j.state = 'running'
       AND ($1::text[] IS NULL OR j.state = ANY($1::text[]))
       AND ($2::text[] IS NULL OR j.kind = ANY($2::text[]))
       AND ($3::text[] IS NULL OR j.queue = ANY($3::text[]))
       AND ($5::bigint IS NULL OR j.batch_id = $5::bigint)
       AND ($6::bigint IS NULL OR j.id > $6::bigint)
       AND ($7::bigint IS NULL OR j.id < $7::bigint)
     ORDER BY j.id
     LIMIT $8)
) u
ORDER BY u.id
LIMIT $8;

-- name: JobListKeyDesc
SELECT u.*
FROM (
    (SELECT j.*
     FROM keel_job j
     WHERE j.flow_key = $4::text AND j.state <> 'running'
       AND ($1::text[] IS NULL OR j.state = ANY($1::text[]))
       AND ($2::text[] IS NULL OR j.kind = ANY($2::text[]))
       AND ($3::text[] IS NULL OR j.queue = ANY($3::text[]))
       AND ($5::bigint IS NULL OR j.batch_id = $5::bigint)
       AND ($6::bigint IS NULL OR j.id > $6::bigint)
       AND ($7::bigint IS NULL OR j.id < $7::bigint)
     ORDER BY j.id DESC
     LIMIT $8)
    UNION ALL
    (SELECT j.*
     FROM keel_job j
     WHERE j.flow_key = $4::text AND j.state = 'running'
       AND ($1::text[] IS NULL OR j.state = ANY($1::text[]))
       AND ($2::text[] IS NULL OR j.kind = ANY($2::text[]))
       AND ($3::text[] IS NULL OR j.queue = ANY($3::text[]))
       AND ($5::bigint IS NULL OR j.batch_id = $5::bigint)
       AND ($6::bigint IS NULL OR j.id > $6::bigint)
       AND ($7::bigint IS NULL OR j.id < $7::bigint)
     ORDER BY j.id DESC
     LIMIT $8)
) u
ORDER BY u.id DESC
LIMIT $8;

-- name: JobPrune
-- Bounded so one call never holds many row locks or bloats WAL in one go.
DELETE FROM keel_job
WHERE id IN (
    SELECT id
    FROM keel_job
    WHERE finalized_at < $1
      AND state IN ('completed', 'failed', 'cancelled', 'skipped')
    ORDER BY finalized_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
);

-- name: JobFinalizedCounts
-- Two index ranges: keel_job_finalized_idx for the rows finalized in one
-- sample interval, however many finished rows the table holds, and
-- keel_job_manual_idx for jobs left needing an operator (not final, so
-- dated by their last attempt).
SELECT state, count(*)
FROM keel_job
WHERE finalized_at > $1 AND finalized_at <= $2
GROUP BY state
UNION ALL
SELECT 'manual', count(*)
FROM keel_job
WHERE state = 'manual' AND attempted_at > $1 AND attempted_at <= $2;
