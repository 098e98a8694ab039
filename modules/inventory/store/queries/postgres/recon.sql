-- Reconciliation's reads.

-- name: CountInsert
INSERT INTO inv_count (count_id, warehouse_id, sku_id, counted, counted_at, imported_by) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (count_id, warehouse_id, sku_id) DO NOTHING;

-- name: CountLatest
-- The latest count per pair taken up to the cutoff, with the books.
SELECT c.count_id, c.warehouse_id, c.sku_id, c.counted, COALESCE(s.on_hand, 0), COALESCE(k.unit_value_minor, 0),
       COALESCE(k.currency, '')
FROM inv_count c
LEFT JOIN inv_stock s ON s.warehouse_id = c.warehouse_id AND s.sku_id = c.sku_id
LEFT JOIN inv_sku k ON k.id = c.sku_id
WHERE c.counted_at <= $1 AND NOT EXISTS (
    SELECT 1 FROM inv_count n WHERE n.warehouse_id = c.warehouse_id AND n.sku_id = c.sku_id AND n.counted_at <= $1
      AND (n.counted_at > c.counted_at OR (n.counted_at = c.counted_at AND n.count_id > c.count_id)))
ORDER BY c.warehouse_id, c.sku_id;

-- name: ReservationLedgerShape
-- Each reservation created up to the cutoff with the movements booked for it.
SELECT r.id, r.order_line, r.state, r.qty,
       COALESCE(sum(CASE WHEN l.movement = 'reserve' THEN 1 ELSE 0 END), 0),
       COALESCE(sum(CASE WHEN l.movement = 'confirm' THEN 1 ELSE 0 END), 0),
       COALESCE(sum(CASE WHEN l.movement = 'release' THEN 1 ELSE 0 END), 0),
       COALESCE(sum(CASE WHEN l.movement = 'return' THEN 1 ELSE 0 END), 0)
FROM inv_reservation r LEFT JOIN inv_ledger l ON l.reservation_id = r.id
WHERE r.created_at <= $1
GROUP BY r.id, r.order_line, r.state, r.qty ORDER BY r.id;

-- name: ConfirmedList
SELECT r.id, r.warehouse_id, r.sku_id, r.qty FROM inv_reservation r
WHERE r.state IN ('confirmed', 'returning', 'returned') AND r.updated_at <= $1 ORDER BY r.id;

-- name: BalanceVsLedger
-- Every balance beside what its ledger rows add up to, in one snapshot.
SELECT s.warehouse_id, s.sku_id, s.on_hand, s.available, s.reserved, s.sold, s.returned, s.version,
       COALESCE(d.on_hand, 0), COALESCE(d.available, 0), COALESCE(d.reserved, 0), COALESCE(d.sold, 0),
       COALESCE(d.returned, 0), COALESCE(d.version, 0), COALESCE(d.n, 0),
       COALESCE(k.unit_value_minor, 0), COALESCE(k.currency, '')
FROM inv_stock s
LEFT JOIN (SELECT warehouse_id, sku_id, sum(d_on_hand) AS on_hand, sum(d_available) AS available,
                  sum(d_reserved) AS reserved, sum(d_sold) AS sold, sum(d_returned) AS returned,
                  max(stock_version) AS version, count(*) AS n
           FROM inv_ledger GROUP BY warehouse_id, sku_id) d
       ON d.warehouse_id = s.warehouse_id AND d.sku_id = s.sku_id
LEFT JOIN inv_sku k ON k.id = s.sku_id
ORDER BY s.warehouse_id, s.sku_id;

-- name: StockCount
SELECT count(*) FROM inv_stock;
