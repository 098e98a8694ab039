-- name: SubmitInsert
INSERT INTO dlv_submit (app_id, msg_id, phones, src_id, service_id, msg_fmt, content, want_report, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
ON CONFLICT (app_id, msg_id) DO NOTHING
RETURNING id;

-- name: SubmitGet
SELECT id, app_id, msg_id, phones, src_id, service_id, msg_fmt, content, want_report, upstream_msg_id,
       upstream_at, created_at
FROM dlv_submit WHERE id = ?1;

-- name: SubmitByMsgID
SELECT id, app_id, msg_id, phones, src_id, service_id, msg_fmt, content, want_report, upstream_msg_id,
       upstream_at, created_at
FROM dlv_submit WHERE app_id = ?1 AND msg_id = ?2;

-- name: SubmitByUpstream
SELECT id, app_id, msg_id, phones, src_id, service_id, msg_fmt, content, want_report, upstream_msg_id,
       upstream_at, created_at
FROM dlv_submit WHERE upstream_msg_id = ?1;

-- name: SubmitSetUpstream
-- Idempotent: a repeated forward of the same submit records the same id.
UPDATE dlv_submit SET upstream_msg_id = ?2, upstream_at = ?3
WHERE id = ?1 AND (upstream_msg_id IS NULL OR upstream_msg_id = ?2);

-- name: SubmitDelete
DELETE FROM dlv_submit WHERE id = ?1;
