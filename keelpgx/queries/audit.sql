-- Statements on keel_audit.

-- name: AuditInsert
INSERT INTO keel_audit (at, actor, action, target, reason, context)
VALUES (coalesce($1::timestamptz, now()), $2, $3, $4, $5, $6::jsonb)
RETURNING id, at, actor, action, target, reason, context;

-- name: AuditList
-- Newest first. starts_with needs no LIKE escaping of the caller's prefix.
-- NULL filters are off; since and until are inclusive.
SELECT id, at, actor, action, target, reason, context
FROM keel_audit
WHERE ($1::text IS NULL OR actor = $1::text)
  AND ($2::text IS NULL OR starts_with(action, $2::text))
  AND ($3::text IS NULL OR target = $3::text)
  AND ($4::timestamptz IS NULL OR at >= $4::timestamptz)
  AND ($5::timestamptz IS NULL OR at <= $5::timestamptz)
  AND ($6::bigint IS NULL OR id < $6::bigint)
ORDER BY id DESC
LIMIT $7;
