-- Statements on keel_audit.

-- name: AuditInsert
INSERT INTO keel_audit (at, actor, action, target, reason, context)
VALUES (:at, :actor, :action, :target, :reason, json(:context))
RETURNING id, at, actor, action, target, reason, context;

-- name: AuditList
-- Empty filters match everything. The walk is newest first by id (stopping
-- at :limit); :before_id is always set (max int64 when open), the time
-- bounds are NULL when open so that the planner does not trade that walk for
-- a sort of the whole at range. Action is a prefix match without LIKE's
-- wildcards.
SELECT id, at, actor, action, target, reason, context
FROM keel_audit
WHERE id < :before_id
  AND (:since IS NULL OR at >= :since)
  AND (:until IS NULL OR at <= :until)
  AND (:actor = '' OR actor = :actor)
  AND (:target = '' OR target = :target)
  AND (:action = '' OR substr(action, 1, length(:action)) = :action)
ORDER BY id DESC
LIMIT :limit;
