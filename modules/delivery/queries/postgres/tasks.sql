-- name: TaskTokenClaim
-- The primary key decides: nothing is returned when the token was claimed.
INSERT INTO dlv_task_token (digest, operator, created_at) VALUES ($1, $2, $3)
ON CONFLICT (digest) DO NOTHING
RETURNING digest;

-- name: TaskTokenSet
UPDATE dlv_task_token SET batch_id = $2 WHERE digest = $1 AND batch_id IS NULL;

-- name: TaskTokenRelease
-- A creation refused before any task existed gives the token back.
DELETE FROM dlv_task_token WHERE digest = $1 AND batch_id IS NULL;

-- name: TaskTokenGet
SELECT coalesce(batch_id, 0) FROM dlv_task_token WHERE digest = $1;
