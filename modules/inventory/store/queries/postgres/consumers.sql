-- The consumers' effects, each in the inbox transaction.

-- name: PickCount
SELECT count(*) FROM inv_pick_task;

-- name: SearchApply
-- Only a newer version moves the projection: it never goes back.
INSERT INTO inv_search (warehouse_id, sku_id, version, available, on_hand, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (warehouse_id, sku_id) DO UPDATE
SET version = excluded.version, available = excluded.available, on_hand = excluded.on_hand,
    updated_at = excluded.updated_at
WHERE inv_search.version < excluded.version;

-- name: SearchGet
SELECT version, available, on_hand FROM inv_search WHERE warehouse_id = $1 AND sku_id = $2;

-- name: SearchStale
INSERT INTO inv_search_stale (warehouse_id, sku_id, version, current, at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT DO NOTHING;

-- name: SearchGap
INSERT INTO inv_search_gap (warehouse_id, sku_id, version, ledger_id, at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (warehouse_id, sku_id, version) DO UPDATE SET ledger_id = excluded.ledger_id;

-- name: SearchLag
SELECT s.warehouse_id, s.sku_id, s.version, COALESCE(p.version, 0)
FROM inv_stock s LEFT JOIN inv_search p ON p.warehouse_id = s.warehouse_id AND p.sku_id = s.sku_id
WHERE COALESCE(p.version, 0) < s.version ORDER BY s.warehouse_id, s.sku_id;

-- name: StatsAdd
INSERT INTO inv_stats (sku_id, movement, events, qty) VALUES ($1, $2, 1, $3)
ON CONFLICT (sku_id, movement) DO UPDATE SET events = inv_stats.events + 1, qty = inv_stats.qty + excluded.qty;

-- name: PickInsertMany
-- A batch of confirmed reservations' pick tasks in one statement: $1..$5
-- parallel arrays (reservation, ledger row, warehouse, SKU, qty), $6 the
-- time. The unique reservation id absorbs a task already written.
INSERT INTO inv_pick_task (reservation_id, ledger_id, warehouse_id, sku_id, qty, created_at)
SELECT u.r, u.l, u.wh, u.sku, u.qty, $6::timestamptz
FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::bigint[]) AS u(r, l, wh, sku, qty)
ON CONFLICT (reservation_id) DO NOTHING;
