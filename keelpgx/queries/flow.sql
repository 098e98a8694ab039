-- Statements of flow control: fair claiming across flow keys, per-key state
-- (keel_flow_key), limits (keel_flow_limit) and priority ageing.
--
-- Durations are bigint microseconds, multiplied by interval '1 microsecond',
-- except in keel_flow_limit, which stores milliseconds. A NULL "now"
-- parameter means the database clock. The empty flow key "" stands for jobs
-- whose flow_key is NULL.

-- name: FlowKeysAvailable
-- A skip scan ("loose index scan") over keel_job_key_claim_idx (queue,
-- flow_key, priority, id) WHERE state = 'available': each step is one index
-- probe for the smallest key above the previous one, so the cost is one
-- probe per key returned, whatever the backlog per key. Order: "" first when
-- jobs without a key are available, then keys > $2, then wrapping around to
-- the smallest key up to and including $2. n numbers the output; both walks
-- stop once $3 keys are found.
-- $1 queue, $2 after, $3 limit.
WITH RECURSIVE
nul AS (
    -- Not EXISTS: the planner may answer that by a sequential scan expected
    -- to stop early, which reads the whole backlog when the NULL jobs sit at
    -- the end. ORDER BY flow_key (all NULL) is what only the index provides.
    SELECT ''::text AS key, 1 AS n
    FROM (SELECT flow_key FROM keel_job
          WHERE state = 'available' AND queue = $1::text AND flow_key IS NULL
          ORDER BY flow_key
          LIMIT 1) first
),
fwd (key, n) AS (
    SELECT (SELECT flow_key FROM keel_job
            WHERE state = 'available' AND queue = $1::text AND flow_key > $2::text
            ORDER BY flow_key LIMIT 1),
           (SELECT count(*) FROM nul)::int + 1
    UNION ALL
    SELECT (SELECT j.flow_key FROM keel_job j
            WHERE j.state = 'available' AND j.queue = $1::text AND j.flow_key > fwd.key
            ORDER BY j.flow_key LIMIT 1),
           fwd.n + 1
    FROM fwd
    WHERE fwd.key IS NOT NULL AND fwd.n < $3::int
),
wrap (key, n) AS (
    SELECT (SELECT flow_key FROM keel_job
            WHERE state = 'available' AND queue = $1::text AND flow_key IS NOT NULL AND flow_key <= $2::text
            ORDER BY flow_key LIMIT 1),
           (SELECT count(*) FROM nul)::int + (SELECT count(*) FROM fwd WHERE key IS NOT NULL)::int + 1
    UNION ALL
    SELECT (SELECT j.flow_key FROM keel_job j
            WHERE j.state = 'available' AND j.queue = $1::text AND j.flow_key > wrap.key AND j.flow_key <= $2::text
            ORDER BY j.flow_key LIMIT 1),
           wrap.n + 1
    FROM wrap
    WHERE wrap.key IS NOT NULL AND wrap.n < $3::int
)
SELECT key
FROM (
    SELECT key, n FROM nul
    UNION ALL
    SELECT key, n FROM fwd WHERE key IS NOT NULL
    UNION ALL
    SELECT key, n FROM wrap WHERE key IS NOT NULL
) keys
WHERE n <= $3::int
ORDER BY n;

-- name: JobClaimKeys
-- One statement for every key. Each LATERAL reads keel_job_key_claim_idx
-- with queue and flow_key as index conditions and the (priority, id) order
-- from the index itself: one lateral for real keys (flow_key = k.key) and
-- one for "" (flow_key IS NULL), because a combined condition (IS NOT
-- DISTINCT FROM, or an OR of both) is not an index condition. Repeated keys
-- are merged (their counts add up). Gated keys (paused, breaker open) and a
-- paused queue are excluded here, so the check holds at claim time on every
-- instance. Items of a batch that is not running (queued, paused; or
-- terminated, for items never claimed) are excluded row by row. The UPDATE
-- is JobClaim's.
-- $1 keys, $2 counts, $3 queue, $4 owner, $5 lease (µs), $6 now.
--
-- The picked ids are handed to the update as an array, "j.id =
-- ANY(ARRAY(...))", rather than joined: the planner cannot know how many
-- rows LIMIT k.n keeps, estimates a tenth of the backlog, and after ANALYZE
-- joined them by a merge join over the whole primary key, reading every
-- job in the table for each claim. The array is probed on the primary key,
-- one lookup per picked job (TestPlansAfterAnalyze).
WITH k AS (
    SELECT u.key, sum(u.n)::int AS n
    FROM unnest($1::text[], $2::int[]) AS u(key, n)
    WHERE u.n > 0
      AND NOT EXISTS (SELECT 1 FROM keel_queue q WHERE q.name = $3::text AND q.paused_at IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM keel_flow_key f
                      WHERE f.key = u.key AND (f.paused_at IS NOT NULL OR f.breaker_state = 'open'))
      -- Batch items carry per-batch keys "batch:<id>:<key>" (the prefix is
      -- reserved): a key of a queued or paused batch is left alone without
      -- walking its backlog. The per-row check below is the rule itself.
      AND CASE WHEN u.key ~ '^batch:[0-9]{1,18}:' THEN NOT EXISTS (
              SELECT 1 FROM keel_batch b
              WHERE b.id = substring(u.key FROM '^batch:([0-9]+):')::bigint
                AND b.state IN ('queued', 'paused'))
          ELSE true END
    GROUP BY u.key
),
picked AS (
    SELECT c.id
    FROM k, LATERAL (
        SELECT id
        FROM keel_job
        WHERE state = 'available' AND queue = $3::text AND flow_key = k.key
          AND (batch_id IS NULL OR NOT EXISTS (SELECT 1 FROM keel_batch b WHERE b.id = keel_job.batch_id
               AND (b.state IN ('queued', 'paused') OR (b.state = 'terminated' AND keel_job.fence = 0))))
        ORDER BY priority, id
        LIMIT k.n
        FOR UPDATE SKIP LOCKED
    ) c
    WHERE k.key <> ''
    UNION ALL
    SELECT c.id
    FROM k, LATERAL (
        SELECT id
        FROM keel_job
        WHERE state = 'available' AND queue = $3::text AND flow_key IS NULL
          AND (batch_id IS NULL OR NOT EXISTS (SELECT 1 FROM keel_batch b WHERE b.id = keel_job.batch_id
               AND (b.state IN ('queued', 'paused') OR (b.state = 'terminated' AND keel_job.fence = 0))))
        -- flow_key leads the order (all NULL here) so the index order serves
        -- it: the planner treats "IS NULL" as no equality, and ORDER BY
        -- priority, id alone would sort every job without a key.
        ORDER BY flow_key, priority, id
        LIMIT k.n
        FOR UPDATE SKIP LOCKED
    ) c
    WHERE k.key = ''
)
UPDATE keel_job j
SET state = 'running',
    attempt = j.attempt + 1,
    fence = j.fence + 1,
    lease_owner = $4,
    lease_expires_at = coalesce($6::timestamptz, now()) + $5::bigint * interval '1 microsecond',
    attempted_at = coalesce($6::timestamptz, now())
WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
RETURNING j.*;

-- name: FlowKeysEnsureSkip
-- Creates missing state rows without ever waiting. A plain INSERT ... ON
-- CONFLICT DO NOTHING waits for another transaction's uncommitted insert of
-- the same key (for as long as that transaction lasts), so creators first
-- take a transaction-scoped advisory lock on the key: here with try, and a
-- key another transaction is creating is left alone (that transaction holds
-- it, so FlowKeysLockSkip would skip it anyway). The advisory lock is held
-- until the creator commits, when its row becomes visible, so an insert
-- under the lock conflicts only with committed rows and never waits.
-- Advisory locks belong to the whole database, not to a schema, so they are
-- namespaced by the schema the engine runs in: two engines in two schemas
-- of one database (tenants, parallel tests) creating the same key must not
-- see each other's creation, or a SkipLocked claimer would skip a key that
-- nobody in its own schema holds. Distinct keys with equal hashtext only
-- share the creation window.
WITH missing AS MATERIALIZED (
    SELECT DISTINCT k
    FROM unnest($1::text[]) AS k
    WHERE NOT EXISTS (SELECT 1 FROM keel_flow_key f WHERE f.key = k)
    ORDER BY k
),
mine AS MATERIALIZED (
    SELECT k FROM missing WHERE pg_try_advisory_xact_lock(hashtext('keel_flow_key:' || coalesce(current_schema(), '')), hashtext(k))
)
INSERT INTO keel_flow_key (key, updated_at)
SELECT k, coalesce($2::timestamptz, now())
FROM mine
ORDER BY k
ON CONFLICT (key) DO NOTHING;

-- name: FlowKeysEnsureWait
-- As FlowKeysEnsureSkip but waits for the advisory locks, taken in key order
-- so that creators of overlapping key sets cannot deadlock.
WITH missing AS MATERIALIZED (
    SELECT DISTINCT k
    FROM unnest($1::text[]) AS k
    WHERE NOT EXISTS (SELECT 1 FROM keel_flow_key f WHERE f.key = k)
    ORDER BY k
),
mine AS MATERIALIZED (
    SELECT k FROM missing, LATERAL (SELECT pg_advisory_xact_lock(hashtext('keel_flow_key:' || coalesce(current_schema(), '')), hashtext(k))) l
)
INSERT INTO keel_flow_key (key, updated_at)
SELECT k, coalesce($2::timestamptz, now())
FROM mine
ORDER BY k
ON CONFLICT (key) DO NOTHING;

-- name: FlowKeysLockSkip
-- Locks in key order, skipping rows held by another transaction. Rows are
-- locked in a CTE and counted after, so the lock clause applies only to
-- keel_flow_key; running jobs are counted from keel_job_running_idx.
WITH locked AS (
    SELECT *
    FROM keel_flow_key
    WHERE key = ANY($1::text[])
    ORDER BY key
    FOR UPDATE SKIP LOCKED
)
SELECT l.key, l.tokens, l.tokens_at, l.paused_at, l.paused_by, l.pause_reason, l.pause_context,
       l.breaker_state, l.breaker_opened_at, l.breaker_probes_left, l.consecutive_failures,
       l.window_start, l.window_calls, l.window_failures, l.ramp_started_at, l.last_error,
       l.last_failure_class, l.last_failure_at, l.last_success_at, l.updated_at,
       (SELECT count(*) FROM keel_job j WHERE j.flow_key = l.key AND j.state = 'running') AS running
FROM locked l
ORDER BY l.key;

-- name: FlowKeysLockWait
-- As FlowKeysLockSkip but waits for rows another transaction holds (in key
-- order, so lockers of overlapping key sets cannot deadlock).
WITH locked AS (
    SELECT *
    FROM keel_flow_key
    WHERE key = ANY($1::text[])
    ORDER BY key
    FOR UPDATE
)
SELECT l.key, l.tokens, l.tokens_at, l.paused_at, l.paused_by, l.pause_reason, l.pause_context,
       l.breaker_state, l.breaker_opened_at, l.breaker_probes_left, l.consecutive_failures,
       l.window_start, l.window_calls, l.window_failures, l.ramp_started_at, l.last_error,
       l.last_failure_class, l.last_failure_at, l.last_success_at, l.updated_at,
       (SELECT count(*) FROM keel_job j WHERE j.flow_key = l.key AND j.state = 'running') AS running
FROM locked l
ORDER BY l.key;

-- name: FlowKeysSave
-- Writes every state field of the given rows in one statement.
UPDATE keel_flow_key f
SET tokens = u.tokens,
    tokens_at = u.tokens_at,
    paused_at = u.paused_at,
    paused_by = u.paused_by,
    pause_reason = u.pause_reason,
    pause_context = u.pause_context::jsonb,
    breaker_state = u.breaker_state,
    breaker_opened_at = u.breaker_opened_at,
    breaker_probes_left = u.breaker_probes_left,
    consecutive_failures = u.consecutive_failures,
    window_start = u.window_start,
    window_calls = u.window_calls,
    window_failures = u.window_failures,
    ramp_started_at = u.ramp_started_at,
    last_error = u.last_error,
    last_failure_class = u.last_failure_class,
    last_failure_at = u.last_failure_at,
    last_success_at = u.last_success_at,
    updated_at = coalesce($20::timestamptz, now())
FROM unnest($1::text[], $2::float8[], $3::timestamptz[], $4::timestamptz[], $5::text[], $6::text[],
            $7::text[], $8::text[], $9::timestamptz[], $10::int[], $11::int[], $12::timestamptz[],
            $13::int[], $14::int[], $15::timestamptz[], $16::text[], $17::text[], $18::timestamptz[],
            $19::timestamptz[])
     AS u(key, tokens, tokens_at, paused_at, paused_by, pause_reason, pause_context, breaker_state,
          breaker_opened_at, breaker_probes_left, consecutive_failures, window_start, window_calls,
          window_failures, ramp_started_at, last_error, last_failure_class, last_failure_at,
          last_success_at)
WHERE f.key = u.key;

-- name: FlowKeysGet
-- State rows of the given keys (no lock), in key order.
SELECT f.key, f.tokens, f.tokens_at, f.paused_at, f.paused_by, f.pause_reason, f.pause_context,
       f.breaker_state, f.breaker_opened_at, f.breaker_probes_left, f.consecutive_failures,
       f.window_start, f.window_calls, f.window_failures, f.ramp_started_at, f.last_error,
       f.last_failure_class, f.last_failure_at, f.last_success_at, f.updated_at,
       (SELECT count(*) FROM keel_job j WHERE j.flow_key = f.key AND j.state = 'running') AS running
FROM keel_flow_key f
WHERE f.key = ANY($1::text[])
ORDER BY f.key;

-- name: FlowKeyList
-- Pages in key order along the primary key. NULL filters are off; $4/$5
-- false are off. The prefix is matched with starts_with, not LIKE, so that
-- '%' and '_' in keys need no escaping.
-- $1 prefix, $2 after, $3 limit, $4 only paused, $5 only tripped, $6 hide
-- the keys of finished batches (batch:<id>:…; the id read only when it is
-- digits, so another key that starts with "batch:" is never a cast error).
SELECT f.key, f.tokens, f.tokens_at, f.paused_at, f.paused_by, f.pause_reason, f.pause_context,
       f.breaker_state, f.breaker_opened_at, f.breaker_probes_left, f.consecutive_failures,
       f.window_start, f.window_calls, f.window_failures, f.ramp_started_at, f.last_error,
       f.last_failure_class, f.last_failure_at, f.last_success_at, f.updated_at,
       (SELECT count(*) FROM keel_job j WHERE j.flow_key = f.key AND j.state = 'running') AS running
FROM keel_flow_key f
WHERE ($1::text IS NULL OR starts_with(f.key, $1::text))
  AND ($2::text IS NULL OR f.key > $2::text)
  AND (NOT $4::boolean OR f.paused_at IS NOT NULL)
  AND (NOT $5::boolean OR f.breaker_state <> 'closed')
  AND (NOT $6::boolean OR NOT starts_with(f.key, 'batch:') OR NOT EXISTS (
        SELECT 1 FROM keel_batch b
        WHERE b.id = CASE WHEN split_part(f.key, ':', 2) ~ '^[0-9]{1,18}$' THEN split_part(f.key, ':', 2)::bigint END
          AND b.state IN ('completed', 'partial_completed', 'terminated')))
ORDER BY f.key
LIMIT $3;

-- name: FlowKeyStats
-- Job counts per (key, state) for the given keys and the oldest run_at among
-- available jobs: running jobs from keel_job_running_idx, the others from
-- keel_job_flow_key_idx, which leaves running jobs out (migration 9).
SELECT j.flow_key, j.state, count(*), min(j.run_at) FILTER (WHERE j.state = 'available')
FROM keel_job j
WHERE j.flow_key = ANY($1::text[]) AND j.flow_key IS NOT NULL AND j.state <> 'running'
GROUP BY j.flow_key, j.state
UNION ALL
SELECT j.flow_key, 'running', count(*), NULL
FROM keel_job j
WHERE j.flow_key = ANY($1::text[]) AND j.state = 'running'
GROUP BY j.flow_key;

-- name: FlowLimitUpsert
-- $1 pattern … $14 ramp (jsonb text), $15 updated_at (NULL = now), $16 updated_by.
INSERT INTO keel_flow_limit (pattern, queue, rate, burst, max_running, breaker_failures, breaker_ratio,
                             breaker_window_ms, breaker_min_calls, breaker_cooldown_ms, breaker_probes,
                             autopause_failures, weight, ramp, updated_at, updated_by)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::jsonb,
        coalesce($15::timestamptz, now()), $16)
ON CONFLICT (pattern, queue) DO UPDATE
SET rate = excluded.rate,
    burst = excluded.burst,
    max_running = excluded.max_running,
    breaker_failures = excluded.breaker_failures,
    breaker_ratio = excluded.breaker_ratio,
    breaker_window_ms = excluded.breaker_window_ms,
    breaker_min_calls = excluded.breaker_min_calls,
    breaker_cooldown_ms = excluded.breaker_cooldown_ms,
    breaker_probes = excluded.breaker_probes,
    autopause_failures = excluded.autopause_failures,
    weight = excluded.weight,
    ramp = excluded.ramp,
    updated_at = excluded.updated_at,
    updated_by = excluded.updated_by
RETURNING pattern, queue, rate, burst, max_running, breaker_failures, breaker_ratio, breaker_window_ms,
          breaker_min_calls, breaker_cooldown_ms, breaker_probes, autopause_failures, weight, ramp,
          updated_at, updated_by;

-- name: FlowLimitDelete
DELETE FROM keel_flow_limit WHERE pattern = $1 AND queue = $2;

-- name: FlowLimitList
SELECT pattern, queue, rate, burst, max_running, breaker_failures, breaker_ratio, breaker_window_ms,
       breaker_min_calls, breaker_cooldown_ms, breaker_probes, autopause_failures, weight, ramp,
       updated_at, updated_by
FROM keel_flow_limit
ORDER BY pattern, queue;

-- name: JobAgePriorities
-- Raises by one level (priority 1 is the highest) available jobs waiting
-- longer than interval × (levels already raised + 1); base_priority keeps
-- the inserted priority. The multiplier is per row, so no index range on
-- run_at serves it; the plain "run_at <= now - interval" bound (the smallest
-- multiplier) prunes what it can and LIMIT bounds the work of one call. The
-- rows are picked in a CTE, evaluated once: "id IN (subquery LIMIT n)" may
-- be re-run per outer row and exceed n.
-- $1 interval (µs), $2 max, $3 now.
WITH picked AS (
    SELECT id
    FROM keel_job
    WHERE state = 'available'
      AND priority > 1
      AND run_at <= coalesce($3::timestamptz, now()) - $1::bigint * interval '1 microsecond'
      AND run_at <= coalesce($3::timestamptz, now())
                    - $1::bigint * interval '1 microsecond' * (coalesce(base_priority, priority) - priority + 1)
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE keel_job j
SET base_priority = coalesce(j.base_priority, j.priority),
    priority = j.priority - 1
FROM picked
WHERE j.id = picked.id;
