-- Statements of flow control: fair claiming across flow keys, per-key state
-- (keel_flow_key), limits (keel_flow_limit) and priority ageing.
--
-- Timestamps are unix microseconds computed by the caller; keel_flow_limit
-- stores durations in milliseconds. The empty flow key '' stands for jobs
-- whose flow_key is NULL (inserts store an empty key as NULL). INDEXED BY
-- pins the plans that must never become scans of the backlog: without
-- ANALYZE statistics the planner may prefer another keel_job index.

-- name: FlowKeysAvailable
-- A skip scan ("loose index scan") over keel_job_key_claim_idx (queue,
-- flow_key, priority, id) WHERE state = 'available': each step is one index
-- probe for the smallest key above the previous one, so the cost is one
-- probe per key returned, whatever the backlog per key. Order: '' first
-- when jobs without a key are available, then keys > :after, then wrapping
-- around to the smallest key up to and including :after. Each walk stops
-- after :limit probes (the LIMIT of a recursive CTE caps the rows it ever
-- produces), so the final sort handles at most 2 × :limit + 1 rows.
WITH RECURSIVE
fwd (key) AS (
    SELECT (SELECT flow_key FROM keel_job INDEXED BY keel_job_key_claim_idx
            WHERE state = 'available' AND queue = :queue AND flow_key > :after
            ORDER BY flow_key LIMIT 1)
    UNION ALL
    SELECT (SELECT j.flow_key FROM keel_job AS j INDEXED BY keel_job_key_claim_idx
            WHERE j.state = 'available' AND j.queue = :queue AND j.flow_key > fwd.key
            ORDER BY j.flow_key LIMIT 1)
    FROM fwd
    WHERE fwd.key IS NOT NULL
    LIMIT :limit
),
wrap (key) AS (
    SELECT (SELECT flow_key FROM keel_job INDEXED BY keel_job_key_claim_idx
            WHERE state = 'available' AND queue = :queue AND flow_key IS NOT NULL AND flow_key <= :after
            ORDER BY flow_key LIMIT 1)
    UNION ALL
    SELECT (SELECT j.flow_key FROM keel_job AS j INDEXED BY keel_job_key_claim_idx
            WHERE j.state = 'available' AND j.queue = :queue AND j.flow_key > wrap.key AND j.flow_key <= :after
            ORDER BY j.flow_key LIMIT 1)
    FROM wrap
    WHERE wrap.key IS NOT NULL
    LIMIT :limit
)
SELECT key FROM (
    SELECT 0 AS part, '' AS key
    WHERE EXISTS (SELECT 1 FROM keel_job INDEXED BY keel_job_key_claim_idx
                  WHERE state = 'available' AND queue = :queue AND flow_key IS NULL)
    UNION ALL
    SELECT 1, key FROM fwd WHERE key IS NOT NULL
    UNION ALL
    SELECT 2, key FROM wrap WHERE key IS NOT NULL
)
ORDER BY part, key
LIMIT :limit;

-- name: JobClaimKeys
-- One statement for every key. :wanted is a JSON array of {"key", "n"}
-- objects with distinct keys and n > 0. SQLite has no LATERAL and a LIMIT
-- cannot refer to an outer row, so "the first n jobs of each key" is a
-- recursive walk along keel_job_key_claim_idx: the first job of the key,
-- then repeatedly the next one after (priority, id), n - 1 times. The next
-- one is the next id at the same priority, else the first job of a lower
-- priority: two exact index seeks. (A row-value "(priority, id) > (p, i)"
-- seeks on priority alone and rescans the level at every step, quadratic in
-- n.) Each step is at most two index probes and one rowid lookup.
-- flow_key IS nullif(key, '') is an index equality that also matches NULL
-- for ''. Gated keys (paused, breaker
-- open) and a paused queue are excluded here, inside the write transaction;
-- so are items of a batch that is not running (queued, paused; terminated
-- for items never claimed).
-- One writer at a time makes the select-then-update atomic (no SKIP LOCKED
-- needed), and the UPDATE is JobClaim's.
WITH RECURSIVE
k (key, n) AS (
    SELECT w.value ->> 'key', w.value ->> 'n'
    FROM json_each(:wanted) AS w
    WHERE NOT EXISTS (SELECT 1 FROM keel_queue q WHERE q.name = :queue AND q.paused_at IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM keel_flow_key f
                      WHERE f.key = w.value ->> 'key'
                        AND (f.paused_at IS NOT NULL OR f.breaker_state = 'open'))
      -- Batch items carry per-batch keys 'batch:<id>:<key>' (the prefix is
      -- reserved): a key of a queued or paused batch is left alone without
      -- walking its backlog. The per-row check in the UPDATE is the rule.
      AND CASE WHEN substr(w.value ->> 'key', 1, 6) = 'batch:' THEN NOT EXISTS (
              SELECT 1 FROM keel_batch AS b
              WHERE b.id = CAST(substr(w.value ->> 'key', 7,
                                       instr(substr(w.value ->> 'key', 7), ':') - 1) AS INTEGER)
                AND b.state IN ('queued', 'paused'))
          ELSE 1 END
),
walk (key, left, id, priority) AS (
    SELECT k.key, k.n, j.id, j.priority
    FROM k
    JOIN keel_job AS j ON j.id = (
        SELECT c.id FROM keel_job AS c INDEXED BY keel_job_key_claim_idx
        WHERE c.state = 'available' AND c.queue = :queue AND c.flow_key IS nullif(k.key, '')
        ORDER BY c.priority, c.id
        LIMIT 1)
    UNION ALL
    SELECT w.key, w.left - 1, j.id, j.priority
    FROM walk AS w
    JOIN keel_job AS j ON j.id = coalesce(
        (SELECT c.id FROM keel_job AS c INDEXED BY keel_job_key_claim_idx
         WHERE c.state = 'available' AND c.queue = :queue AND c.flow_key IS nullif(w.key, '')
           AND c.priority = w.priority AND c.id > w.id
         ORDER BY c.id
         LIMIT 1),
        (SELECT c.id FROM keel_job AS c INDEXED BY keel_job_key_claim_idx
         WHERE c.state = 'available' AND c.queue = :queue AND c.flow_key IS nullif(w.key, '')
           AND c.priority > w.priority
         ORDER BY c.priority, c.id
         LIMIT 1))
    WHERE w.left > 1
)
UPDATE keel_job
SET state = 'running',
    attempt = attempt + 1,
    fence = fence + 1,
    lease_owner = :owner,
    lease_expires_at = :lease_expires_at,
    attempted_at = :now
WHERE id IN (SELECT id FROM walk)
  AND (batch_id IS NULL OR NOT EXISTS (SELECT 1 FROM keel_batch AS b WHERE b.id = keel_job.batch_id
       AND (b.state IN ('queued', 'paused') OR (b.state = 'terminated' AND keel_job.fence = 0))))
RETURNING id, kind, queue, args, metadata, state, priority, run_at, attempt, max_attempts, fence,
    lease_owner, lease_expires_at, idempotency_key, flow_key, batch_id, subject, wait_reason,
    wait_deadline, needs_check, cancel_requested, result, errors, created_at, attempted_at, finalized_at;

-- name: FlowKeysEnsure
-- Creates missing state rows (:keys is a JSON array of strings). Being a
-- write, it also takes the database write lock if the transaction did not
-- hold it yet: from here to commit no other writer runs.
INSERT OR IGNORE INTO keel_flow_key (key, updated_at)
SELECT DISTINCT value, :now FROM json_each(:keys);

-- name: FlowKeysGet
-- The state rows of :keys (a JSON array) in key order, with the running
-- count of each key from keel_job_key_running_idx ('' counts nothing: jobs
-- without a key have no per-key picture).
SELECT f.key, f.tokens, f.tokens_at, f.paused_at, f.paused_by, f.pause_reason, f.pause_context,
       f.breaker_state, f.breaker_opened_at, f.breaker_probes_left, f.consecutive_failures,
       f.window_start, f.window_calls, f.window_failures, f.ramp_started_at, f.last_error,
       f.last_failure_class, f.last_failure_at, f.last_success_at, f.updated_at,
       (SELECT count(*) FROM keel_job AS j INDEXED BY keel_job_key_running_idx
        WHERE j.state = 'running' AND j.flow_key = f.key) AS running
FROM keel_flow_key AS f
WHERE f.key IN (SELECT value FROM json_each(:keys))
ORDER BY f.key;

-- name: FlowKeySave
-- One row of FlowKeysSave; a key without a state row is left alone.
UPDATE keel_flow_key
SET tokens = :tokens,
    tokens_at = :tokens_at,
    paused_at = :paused_at,
    paused_by = :paused_by,
    pause_reason = :pause_reason,
    pause_context = json(:pause_context),
    breaker_state = :breaker_state,
    breaker_opened_at = :breaker_opened_at,
    breaker_probes_left = :breaker_probes_left,
    consecutive_failures = :consecutive_failures,
    window_start = :window_start,
    window_calls = :window_calls,
    window_failures = :window_failures,
    ramp_started_at = :ramp_started_at,
    last_error = :last_error,
    last_failure_class = :last_failure_class,
    last_failure_at = :last_failure_at,
    last_success_at = :last_success_at,
    updated_at = :now
WHERE key = :key;

-- name: FlowKeyList
-- Pages along the primary key: :from (the larger of the prefix and the
-- previous page's last key) bounds the range, :after (NULL on the first
-- page, so that a '' key is listed) excludes the last key itself. The
-- prefix is matched with substr, not LIKE, so that '%' and '_' in keys need
-- no escaping. Flags are 0 (off) or 1.
SELECT f.key, f.tokens, f.tokens_at, f.paused_at, f.paused_by, f.pause_reason, f.pause_context,
       f.breaker_state, f.breaker_opened_at, f.breaker_probes_left, f.consecutive_failures,
       f.window_start, f.window_calls, f.window_failures, f.ramp_started_at, f.last_error,
       f.last_failure_class, f.last_failure_at, f.last_success_at, f.updated_at,
       (SELECT count(*) FROM keel_job AS j INDEXED BY keel_job_key_running_idx
        WHERE j.state = 'running' AND j.flow_key = f.key) AS running
FROM keel_flow_key AS f
WHERE f.key >= :from
  AND (:after IS NULL OR f.key > :after)
  AND substr(f.key, 1, length(:prefix)) = :prefix
  AND (:only_paused = 0 OR f.paused_at IS NOT NULL)
  AND (:only_tripped = 0 OR f.breaker_state <> 'closed')
  -- :hide_finished leaves out the keys of finished batches (batch:<id>:…).
  AND (:hide_finished = 0 OR substr(f.key, 1, 6) <> 'batch:' OR NOT EXISTS (
        SELECT 1 FROM keel_batch AS b
        WHERE b.id = CAST(substr(f.key, 7, instr(substr(f.key, 7), ':') - 1) AS INTEGER)
          AND b.state IN ('completed', 'partial_completed', 'terminated')))
ORDER BY f.key
LIMIT :limit;

-- name: FlowKeyStats
-- Job counts per (key, state) for :keys (a JSON array), read through
-- keel_job_flow_key_idx (flow_key, id) WHERE flow_key IS NOT NULL; the
-- oldest run_at among available jobs.
SELECT flow_key, state, count(*), min(CASE WHEN state = 'available' THEN run_at END)
FROM keel_job INDEXED BY keel_job_flow_key_idx
WHERE flow_key IN (SELECT value FROM json_each(:keys))
GROUP BY flow_key, state;

-- name: FlowLimitUpsert
INSERT INTO keel_flow_limit (pattern, queue, rate, burst, max_running, breaker_failures, breaker_ratio,
    breaker_window_ms, breaker_min_calls, breaker_cooldown_ms, breaker_probes, autopause_failures,
    weight, ramp, updated_at, updated_by)
VALUES (:pattern, :queue, :rate, :burst, :max_running, :breaker_failures, :breaker_ratio,
    :breaker_window_ms, :breaker_min_calls, :breaker_cooldown_ms, :breaker_probes, :autopause_failures,
    :weight, json(:ramp), :updated_at, :updated_by)
ON CONFLICT (pattern, queue) DO UPDATE SET
    rate = excluded.rate,
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
DELETE FROM keel_flow_limit WHERE pattern = :pattern AND queue = :queue;

-- name: FlowLimitList
SELECT pattern, queue, rate, burst, max_running, breaker_failures, breaker_ratio, breaker_window_ms,
    breaker_min_calls, breaker_cooldown_ms, breaker_probes, autopause_failures, weight, ramp,
    updated_at, updated_by
FROM keel_flow_limit
ORDER BY pattern, queue;

-- name: JobAgePriorities
-- Raises by one level (priority 1 is the highest) available jobs waiting
-- longer than :interval × (levels already raised + 1); base_priority keeps
-- the inserted priority. The multiplier is per row, so no index range on
-- run_at serves it: the walk reads keel_job_key_claim_idx, which holds only
-- available jobs (never the final ones), and :max bounds the work of one
-- call. The plain "run_at <= :now - :interval" term (the smallest
-- multiplier) is a cheap first filter.
UPDATE keel_job
SET base_priority = coalesce(base_priority, priority),
    priority = priority - 1
WHERE id IN (
    SELECT id FROM keel_job INDEXED BY keel_job_key_claim_idx
    WHERE state = 'available'
      AND priority > 1
      AND run_at <= :now - :interval
      AND run_at <= :now - :interval * (coalesce(base_priority, priority) - priority + 1)
    LIMIT :max
);
