-- No-show records, the booking policy and restrictions.

-- name: NoShowInsertMany
INSERT INTO rsv_noshow (user_id, reservation_id, category_id, at)
SELECT ?2 ->> i.key, i.value, ?3 ->> i.key, ?4
FROM json_each(?1) i
WHERE true
ON CONFLICT (reservation_id) DO NOTHING;

-- name: NoShowVoidReservation
UPDATE rsv_noshow SET voided_at = ?2, voided_by = ?3, void_reason = ?4
WHERE reservation_id = ?1 AND voided_at IS NULL;

-- name: NoShowVoidUser
UPDATE rsv_noshow SET voided_at = ?2, voided_by = ?3, void_reason = ?4
WHERE user_id = ?1 AND voided_at IS NULL;

-- name: NoShowCounts
SELECT count(*),
       (count(*) FILTER (WHERE voided_at IS NULL AND at > ?2)),
       (count(*) FILTER (WHERE voided_at IS NOT NULL))
FROM rsv_noshow WHERE user_id = ?1;

-- name: PolicyGet
SELECT enabled, threshold, window_days, restrict_days, version, updated_at, updated_by
FROM rsv_policy WHERE id = 1;

-- name: PolicyUpdate
UPDATE rsv_policy
SET enabled = ?2, threshold = ?3, window_days = ?4, restrict_days = ?5, version = version + 1,
    updated_at = ?6, updated_by = ?7
WHERE id = 1 AND version = ?1
RETURNING version;

-- name: RestrictionsExpire
-- A restriction whose period ended stops being active.
UPDATE rsv_restriction SET lifted_at = until, lifted_by = 'system', lift_reason = 'period ended'
WHERE user_id IN (SELECT value FROM json_each(?1)) AND lifted_at IS NULL AND until <= ?2;

-- name: RestrictMany
-- Users among ?1 with at least ?3 unvoided no-shows since ?2 and no active
-- restriction are restricted until ?5.
INSERT INTO rsv_restriction (user_id, since, until, noshows)
SELECT n.user_id, ?4, ?5, count(*)
FROM rsv_noshow n
WHERE n.user_id IN (SELECT value FROM json_each(?1)) AND n.at > ?2 AND n.voided_at IS NULL
GROUP BY n.user_id
HAVING count(*) >= ?3
ON CONFLICT (user_id) WHERE lifted_at IS NULL DO NOTHING
RETURNING user_id, noshows;

-- name: RestrictionActive
SELECT id, user_id, since, until, noshows, lifted_at, lifted_by, lift_reason
FROM rsv_restriction WHERE user_id = ?1 AND lifted_at IS NULL AND until > ?2;

-- name: RestrictionLift
UPDATE rsv_restriction SET lifted_at = ?2, lifted_by = ?3, lift_reason = ?4
WHERE user_id = ?1 AND lifted_at IS NULL
RETURNING id;
