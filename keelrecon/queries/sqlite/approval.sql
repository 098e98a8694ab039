-- name: ApprovalColumns
id, kind, target, action_id, summary, amount, currency, state, requested_by, request_reason, requested_at,
decided_by, decision_reason, decided_at, executed_by, executed_at

-- name: ApprovalInsert
INSERT INTO keel_approval (kind, target, action_id, summary, amount, currency, requested_by, request_reason,
    requested_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
ON CONFLICT (kind, action_id) DO NOTHING
RETURNING id;

-- name: ApprovalGet
SELECT
-- include: ApprovalColumns
FROM keel_approval WHERE id = ?1;

-- name: ApprovalByAction
SELECT
-- include: ApprovalColumns
FROM keel_approval WHERE kind = ?1 AND action_id = ?2;

-- name: ApprovalDecide
-- Four-eyes: the decider is not the requester, in the statement itself.
UPDATE keel_approval SET state = ?2, decided_by = ?3, decision_reason = ?4, decided_at = ?5
WHERE id = ?1 AND state = 'pending' AND requested_by <> ?3;

-- name: ApprovalExecute
UPDATE keel_approval SET state = 'executed', executed_by = ?2, executed_at = ?3
WHERE id = ?1 AND state = 'approved';

-- name: ApprovalCancel
UPDATE keel_approval SET state = 'cancelled', decided_at = COALESCE(decided_at, ?2)
WHERE id = ?1 AND state IN ('pending', 'approved');

-- name: ApprovalList
SELECT
-- include: ApprovalColumns
FROM keel_approval
WHERE (?1 = '' OR state = ?1) AND (?2 = '' OR kind = ?2) AND (?3 = '' OR requested_by <> ?3)
  AND (?4 = 0 OR id < ?4)
ORDER BY id DESC
LIMIT ?5;
