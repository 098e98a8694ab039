-- name: PresenceBeat
-- $1: JSON array of {"app_id", "conns"} this instance holds.
INSERT INTO dlv_presence (app_id, instance, conns, heartbeat_at)
SELECT v.app_id, $2, v.conns, $3 FROM jsonb_to_recordset($1::jsonb) AS v (app_id bigint, conns integer)
ON CONFLICT (app_id, instance) DO UPDATE SET conns = excluded.conns, heartbeat_at = excluded.heartbeat_at;

-- name: PresenceDrop
-- Removes this instance's rows for applications it no longer holds ($2: JSON array of held ids).
DELETE FROM dlv_presence
WHERE instance = $1 AND app_id NOT IN (SELECT jsonb_array_elements_text($2::jsonb)::bigint);

-- name: PresenceLive
-- Application 0 is each instance's own row: the instance is alive.
SELECT app_id, instance FROM dlv_presence WHERE heartbeat_at >= $1 ORDER BY app_id, instance;
