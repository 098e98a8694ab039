-- Warehouses, SKUs and balances. Every balance change is one conditional
-- UPDATE: zero rows means the condition failed and the caller reads back
-- to classify why.

-- name: WarehouseUpsert
INSERT INTO inv_warehouse (id, name_zh, name_en, created_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO UPDATE SET name_zh = excluded.name_zh, name_en = excluded.name_en;

-- name: SkuUpsert
INSERT INTO inv_sku (id, name_zh, name_en, unit_value_minor, currency, created_at) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (id) DO UPDATE SET name_zh = excluded.name_zh, name_en = excluded.name_en,
                               unit_value_minor = excluded.unit_value_minor, currency = excluded.currency;

-- name: SkuGet
SELECT id, name_zh, name_en, unit_value_minor, currency FROM inv_sku WHERE id = $1;

-- name: WarehouseExists
SELECT count(*) FROM inv_warehouse WHERE id = $1;

-- name: StockInit
INSERT INTO inv_stock (warehouse_id, sku_id, on_hand, available, reserved, sold, returned, version, updated_at)
VALUES ($1, $2, 0, 0, 0, 0, 0, 0, $3)
ON CONFLICT (warehouse_id, sku_id) DO NOTHING;

-- name: StockGet
SELECT on_hand, available, reserved, sold, returned, version, updated_at
FROM inv_stock WHERE warehouse_id = $1 AND sku_id = $2;

-- name: StockList
SELECT s.warehouse_id, s.sku_id, k.name_zh, k.name_en, s.on_hand, s.available, s.reserved, s.sold, s.returned,
       s.version, s.updated_at, COALESCE(p.available, -1), COALESCE(p.version, 0), COALESCE(p.updated_at, s.updated_at)
FROM inv_stock s JOIN inv_sku k ON k.id = s.sku_id
LEFT JOIN inv_search p ON p.warehouse_id = s.warehouse_id AND p.sku_id = s.sku_id
WHERE ($1 = '' OR s.warehouse_id = $1) AND (s.warehouse_id, s.sku_id) > ($2, $3)
ORDER BY s.warehouse_id, s.sku_id LIMIT $4;

-- name: StockAll
SELECT warehouse_id, sku_id, on_hand, available, reserved, sold, returned, version
FROM inv_stock ORDER BY warehouse_id, sku_id;

-- name: StockReserve
UPDATE inv_stock SET available = available - $3, reserved = reserved + $3, version = version + 1, updated_at = $4
WHERE warehouse_id = $1 AND sku_id = $2 AND available >= $3
RETURNING on_hand, available, reserved, sold, returned, version;

-- name: StockRelease
UPDATE inv_stock SET available = available + $3, reserved = reserved - $3, version = version + 1, updated_at = $4
WHERE warehouse_id = $1 AND sku_id = $2 AND reserved >= $3
RETURNING on_hand, available, reserved, sold, returned, version;

-- name: StockConfirm
UPDATE inv_stock SET on_hand = on_hand - $3, reserved = reserved - $3, sold = sold + $3, version = version + 1,
                     updated_at = $4
WHERE warehouse_id = $1 AND sku_id = $2 AND reserved >= $3
RETURNING on_hand, available, reserved, sold, returned, version;

-- name: StockReturn
UPDATE inv_stock SET on_hand = on_hand + $3, available = available + $3, returned = returned + $3,
                     version = version + 1, updated_at = $4
WHERE warehouse_id = $1 AND sku_id = $2
RETURNING on_hand, available, reserved, sold, returned, version;

-- name: StockAdjust
-- Receipts and corrections: $3 is signed; available may not go below zero.
UPDATE inv_stock SET on_hand = on_hand + $3, available = available + $3, version = version + 1, updated_at = $4
WHERE warehouse_id = $1 AND sku_id = $2 AND available + $3 >= 0
RETURNING on_hand, available, reserved, sold, returned, version;
