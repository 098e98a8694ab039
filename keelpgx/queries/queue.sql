-- Statements on keel_queue.

-- name: QueuePause
INSERT INTO keel_queue (name, paused_at, paused_by, created_at, updated_at)
VALUES ($1, coalesce($3::timestamptz, now()), $2, coalesce($3::timestamptz, now()), coalesce($3::timestamptz, now()))
ON CONFLICT (name) DO UPDATE
SET paused_at = excluded.paused_at,
    paused_by = excluded.paused_by,
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
SELECT name, paused_at, paused_by, created_at, updated_at FROM keel_queue ORDER BY name;

-- name: QueueStats
-- One row per (queue, state) with live (not final) jobs, read from
-- keel_job_live_idx: the depth that matters, at a cost that does not grow
-- with millions of finished rows. Queues that only have a keel_queue row
-- come back once with a NULL state.
WITH counts AS (
    SELECT queue, state, count(*) AS n FROM keel_job WHERE finalized_at IS NULL GROUP BY queue, state
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
