-- Service categories and their release settings.

-- name: CategoryList
SELECT id, name_zh, name_en, grace_minutes, bands, reminder_minutes, appeal_minutes, hold_minutes,
       release_mode, version, updated_at, updated_by
FROM rsv_category ORDER BY id;

-- name: CategoryGet
SELECT id, name_zh, name_en, grace_minutes, bands, reminder_minutes, appeal_minutes, hold_minutes,
       release_mode, version, updated_at, updated_by
FROM rsv_category WHERE id = $1;

-- name: CategoryInsert
INSERT INTO rsv_category (id, name_zh, name_en, grace_minutes, bands, reminder_minutes, appeal_minutes,
                          hold_minutes, release_mode, updated_at, updated_by)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (id) DO NOTHING;

-- name: CategoryUpdate
UPDATE rsv_category
SET name_zh = $3, name_en = $4, grace_minutes = $5, bands = $6, reminder_minutes = $7,
    appeal_minutes = $8, hold_minutes = $9, release_mode = $10, updated_at = $11, updated_by = $12,
    version = version + 1
WHERE id = $1 AND version = $2;
