-- The unique stock ledger and the idempotency records.

-- name: LedgerInsert
INSERT INTO inv_ledger (intent, warehouse_id, sku_id, movement, qty, d_on_hand, d_available, d_reserved, d_sold,
                        d_returned, stock_version, reservation_id, reason, actor, at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
RETURNING id;

-- name: LedgerByVersion
SELECT id, movement, qty, stock_version FROM inv_ledger
WHERE warehouse_id = ?1 AND sku_id = ?2 AND stock_version = ?3;

-- name: LedgerByReservation
SELECT id, intent, warehouse_id, sku_id, movement, qty, d_on_hand, d_available, d_reserved, d_sold, d_returned,
       stock_version, COALESCE(reservation_id, 0), reason, actor, at
FROM inv_ledger WHERE reservation_id = ?1 ORDER BY id;

-- name: LedgerList
SELECT id, intent, warehouse_id, sku_id, movement, qty, d_on_hand, d_available, d_reserved, d_sold, d_returned,
       stock_version, COALESCE(reservation_id, 0), reason, actor, at
FROM inv_ledger WHERE warehouse_id = ?1 AND sku_id = ?2 ORDER BY stock_version DESC LIMIT ?3;

-- name: LedgerDerive
-- What the ledger says each balance is, up to a cutoff.
SELECT warehouse_id, sku_id, sum(d_on_hand), sum(d_available), sum(d_reserved), sum(d_sold), sum(d_returned),
       max(stock_version), count(*)
FROM inv_ledger WHERE at <= ?1 GROUP BY warehouse_id, sku_id ORDER BY warehouse_id, sku_id;

-- name: LedgerCount
SELECT count(*) FROM inv_ledger WHERE warehouse_id = ?1 AND sku_id = ?2;

-- name: ActionInsert
INSERT INTO inv_action (action_key, params, result, created_at) VALUES (?1, ?2, '', ?3)
ON CONFLICT (action_key) DO NOTHING;

-- name: ActionGet
SELECT params, result FROM inv_action WHERE action_key = ?1;

-- name: ActionResult
UPDATE inv_action SET result = ?2 WHERE action_key = ?1;

-- name: ActionDelete
-- A coalesced request that goes to the next batch gives its key back.
DELETE FROM inv_action WHERE action_key = ?1 AND result = '';
