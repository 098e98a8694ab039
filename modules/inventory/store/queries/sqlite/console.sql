-- The console's home numbers and lookups (console.go of the module).

-- name: HomeOpenConflicts
-- Tickets still needing an operator: open, or resolved by an adjustment
-- that awaits its second approver (inv_conflict_state serves both ranges).
SELECT count(*) FROM inv_conflict WHERE state IN ('open', 'awaiting_approval');

-- name: SearchSkuWarehouses
-- The warehouses holding stock of one SKU, for a lookup by SKU id. It
-- reads inv_stock past its (warehouse, SKU) key, once per search an
-- operator types, never on a schedule.
SELECT warehouse_id FROM inv_stock WHERE sku_id = $1 ORDER BY warehouse_id LIMIT 20;
