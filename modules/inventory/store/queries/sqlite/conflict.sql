-- Conflict tickets and adjustments.

-- name: ConflictInsert
INSERT INTO inv_conflict (intent, reservation_id, warehouse_id, sku_id, kind, state, evidence, opened_at)
VALUES (?1, ?2, ?3, ?4, ?5, 'open', ?6, ?7)
ON CONFLICT (intent) DO NOTHING
RETURNING id;

-- name: ConflictByIntent
SELECT id FROM inv_conflict WHERE intent = ?1;

-- name: ConflictGet
SELECT id, intent, COALESCE(reservation_id, 0), warehouse_id, sku_id, kind, state, evidence, opened_at,
       resolved_at, resolution, COALESCE(adjustment_id, 0)
FROM inv_conflict WHERE id = ?1;

-- name: ConflictList
SELECT id, intent, COALESCE(reservation_id, 0), warehouse_id, sku_id, kind, state, evidence, opened_at,
       resolved_at, resolution, COALESCE(adjustment_id, 0)
FROM inv_conflict WHERE (?1 = '' OR state = ?1) AND id < ?2 ORDER BY id DESC LIMIT ?3;

-- name: ConflictResolve
UPDATE inv_conflict SET state = ?2, resolved_at = ?3, resolution = ?4, adjustment_id = ?5
WHERE id = ?1 AND state IN ('open', 'awaiting_approval');

-- name: ConflictAwait
UPDATE inv_conflict SET state = 'awaiting_approval', adjustment_id = ?2 WHERE id = ?1 AND state = 'open';

-- name: AdjustmentInsert
INSERT INTO inv_adjustment (intent, warehouse_id, sku_id, delta, value_minor, currency, reason, state, requested_by,
                            conflict_id, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)
ON CONFLICT (intent) DO NOTHING
RETURNING id;

-- name: AdjustmentByIntent
SELECT id FROM inv_adjustment WHERE intent = ?1;

-- name: AdjustmentGet
SELECT id, intent, warehouse_id, sku_id, delta, value_minor, currency, reason, state, requested_by, approved_by,
       COALESCE(conflict_id, 0), COALESCE(ledger_id, 0), created_at, updated_at
FROM inv_adjustment WHERE id = ?1;

-- name: AdjustmentList
SELECT id, intent, warehouse_id, sku_id, delta, value_minor, currency, reason, state, requested_by, approved_by,
       COALESCE(conflict_id, 0), COALESCE(ledger_id, 0), created_at, updated_at
FROM inv_adjustment WHERE id < ?1 ORDER BY id DESC LIMIT ?2;

-- name: AdjustmentApplied
UPDATE inv_adjustment SET state = 'applied', approved_by = ?2, ledger_id = ?3, updated_at = ?4
WHERE id = ?1 AND state IN ('pending', 'awaiting_approval');

-- name: AdjustmentRejected
UPDATE inv_adjustment SET state = 'rejected', approved_by = ?2, updated_at = ?3
WHERE id = ?1 AND state = 'awaiting_approval';

-- name: ConflictReopen
-- A rejected resolution leaves the ticket open for another.
UPDATE inv_conflict SET state = 'open', adjustment_id = NULL WHERE id = ?1 AND state = 'awaiting_approval';
