-- Statements on keel_queue.

-- name: QueuePause
-- Pausing a paused queue keeps who paused it and when.
INSERT INTO keel_queue (name, paused_at, paused_by, created_at, updated_at)
VALUES (:name, :now, :by, :now, :now)
ON CONFLICT (name) DO UPDATE SET
    paused_by = CASE WHEN keel_queue.paused_at IS NULL THEN excluded.paused_by ELSE keel_queue.paused_by END,
    paused_at = coalesce(keel_queue.paused_at, excluded.paused_at),
    updated_at = excluded.updated_at
RETURNING name, paused_at, paused_by, created_at, updated_at;

-- name: QueueResume
INSERT INTO keel_queue (name, paused_at, paused_by, created_at, updated_at)
VALUES (:name, NULL, NULL, :now, :now)
ON CONFLICT (name) DO UPDATE SET
    paused_at = NULL,
    paused_by = NULL,
    updated_at = excluded.updated_at
RETURNING name, paused_at, paused_by, created_at, updated_at;

-- name: QueueRegister
-- A queue exists once a live job names it; listing writes its row. The scan
-- reads keel_job_live_idx (live rows only), never the finished history.
INSERT INTO keel_queue (name, created_at, updated_at)
SELECT DISTINCT queue, :now, :now FROM keel_job INDEXED BY keel_job_live_idx WHERE finalized_at IS NULL
ON CONFLICT (name) DO NOTHING;

-- name: QueueList
SELECT name, paused_at, paused_by, created_at, updated_at
FROM keel_queue
ORDER BY name;

-- name: QueueStatsJobs
-- Live (not final) jobs only, from keel_job_live_idx: queue depth, at a cost
-- that does not grow with finished rows.
SELECT queue, state, count(*), min(CASE WHEN state = 'available' THEN run_at END)
FROM keel_job INDEXED BY keel_job_live_idx
WHERE finalized_at IS NULL
GROUP BY queue, state;
