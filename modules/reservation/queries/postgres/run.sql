-- Run records: one row per scan or compensation run with its figures.

-- name: RunInsert
INSERT INTO rsv_run (kind, instance, started_at, finished_at, scanned, released, failed, restore_ok,
                     restore_failed, promoted, holds_expired, dry_run, dead_lettered, first_id, last_id, errors)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
RETURNING id;

-- name: RunList
SELECT id, kind, instance, started_at, finished_at, scanned, released, failed, restore_ok,
       restore_failed, promoted, holds_expired, dry_run, dead_lettered, first_id, last_id, errors
FROM rsv_run
WHERE ($1::text = '' OR kind = $1) AND ($2::bigint = 0 OR id < $2)
ORDER BY id DESC
LIMIT $3;
