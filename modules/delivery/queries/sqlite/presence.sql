-- name: PresenceBeat
-- ?1: JSON array of {"app_id", "conns"} this instance holds.
INSERT INTO dlv_presence (app_id, instance, conns, heartbeat_at)
SELECT json_extract(value, '$.app_id'), ?2, json_extract(value, '$.conns'), ?3 FROM json_each(?1) WHERE true
ON CONFLICT (app_id, instance) DO UPDATE SET conns = excluded.conns, heartbeat_at = excluded.heartbeat_at;

-- name: PresenceDrop
-- Removes this instance's rows for applications it no longer holds (?2: JSON array of held ids).
DELETE FROM dlv_presence
WHERE instance = ?1 AND app_id NOT IN (SELECT value FROM json_each(?2));

-- name: PresenceLive
-- Application 0 is each instance's own row: the instance is alive.
SELECT app_id, instance FROM dlv_presence WHERE heartbeat_at >= ?1 ORDER BY app_id, instance;
