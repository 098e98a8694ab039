-- Statements on keel_queue.

-- name: QueuePause
-- Pausing a paused queue keeps who paused it and when.
INSERT INTO keel_queue (name, paused_at, paused_by, created_at, updated_at)
VALUES ($1, coalesce($3::timestamptz, now()), $2, coalesce($3::timestamptz, now()), coalesce($3::timestamptz, now()))
ON CONFLICT (name) DO UPDATE
SET paused_at = coalesce(keel_queue.paused_at, excluded.paused_at),
    paused_by = CASE WHEN keel_queue.paused_at IS NULL THEN excluded.paused_by ELSE keel_queue.paused_by END,
    updated_at = excluded.updated_at
RETURNING name, paused_at, paused_by, created_at, updated_at;

-- name: QueueResume
-- An upsert so resuming a queue that was never paused is not an error.
INSERT INTO keel_queue (name, created_at, updated_at)
VALUES ($1, now(), now())
ON CONFLICT (name) DO UPDATE
SET paused_at = NULL,
    paused_by = NULL,
    updated_at = excluded.updated_at
RETURNING name, paused_at, paused_by, created_at, updated_at;

-- name: QueueList
-- A queue exists once a live job names it; listing writes its row (read
-- from keel_job_live_idx and keel_job_running_idx, never the finished
-- history). The main query sees keel_queue as it was before the insert, so
-- the rows written here come from RETURNING.
WITH registered AS (
    INSERT INTO keel_queue (name, created_at, updated_at)
    SELECT queue, now(), now() FROM (
        SELECT queue FROM keel_job WHERE finalized_at IS NULL AND state <> 'running'
        UNION
        SELECT queue FROM keel_job WHERE state = 'running'
    ) live
    ON CONFLICT (name) DO NOTHING
    RETURNING name, paused_at, paused_by, created_at, updated_at
)
SELECT name, paused_at, paused_by, created_at, updated_at FROM keel_queue
UNION ALL
SELECT name, paused_at, paused_by, created_at, updated_at FROM registered
ORDER BY name;

-- name: QueueStats
-- One row per (queue, state) with live (not final) jobs, read from
-- keel_job_live_idx and, for running jobs (which that index leaves out, see
-- migration 7), keel_job_running_idx: the depth that matters, at a cost that
-- does not grow with millions of finished rows. Queues that only have a
-- keel_queue row come back once with a NULL state.
WITH counts AS (
    SELECT queue, state, count(*) AS n FROM keel_job
    WHERE finalized_at IS NULL AND state <> 'running' GROUP BY queue, state
    UNION ALL
    SELECT queue, state, count(*) AS n FROM keel_job WHERE state = 'running' GROUP BY queue, state
),
oldest AS (
    SELECT queue, min(run_at) AS run_at FROM keel_job WHERE state = 'available' GROUP BY queue
),
names AS (
    SELECT queue AS name FROM counts
    UNION
    SELECT name FROM keel_queue
)
SELECT n.name, c.state, coalesce(c.n, 0), o.run_at, coalesce(q.paused_at IS NOT NULL, false)
FROM names n
LEFT JOIN counts c ON c.queue = n.name
LEFT JOIN oldest o ON o.queue = n.name
LEFT JOIN keel_queue q ON q.name = n.name
ORDER BY n.name, c.state;
