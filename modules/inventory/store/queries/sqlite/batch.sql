-- The coalesced reservation path: a batch of requests, over one or many
-- (warehouse, SKU) pairs, in one transaction with one statement per kind
-- of row. Lists come as one JSON argument (the same on both databases);
-- rows are written in list order so that ids follow arrival order.

-- name: ActionClaimMany
-- ?1: [[key, params], ...]. Returns the keys this batch claimed.
INSERT INTO inv_action (action_key, params, result, created_at)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), '', ?2 FROM json_each(?1) WHERE true
ORDER BY json_extract(value, '$[0]')
ON CONFLICT (action_key) DO NOTHING
RETURNING action_key;

-- name: ActionGetMany
SELECT action_key, params, result FROM inv_action WHERE action_key IN (SELECT value FROM json_each(?1));

-- name: ActionResultMany
-- ?1 keys, ?2 their results, position by position.
UPDATE inv_action SET result = r.value FROM json_each(?1) AS k JOIN json_each(?2) AS r ON r.key = k.key
WHERE inv_action.action_key = k.value;

-- name: ActionDeleteMany
-- Requests that go to the next batch (or on their own) give their keys back.
DELETE FROM inv_action WHERE action_key IN (SELECT value FROM json_each(?1)) AND result = '';

-- name: StockReserveMany
-- ?1, ?2: the pairs (each once); ?3: every request's running total within
-- its pair, in arrival order; ?4, ?5: where each pair's totals start and
-- end in ?3 (1-based, inclusive). Per pair, every request whose running
-- total fits the available quantity is granted; last_grant says how many.
-- A pair without a row is not returned.
UPDATE inv_stock SET (available, reserved, version, last_grant, updated_at) =
    (SELECT inv_stock.available - COALESCE(max(c.value), 0), inv_stock.reserved + COALESCE(max(c.value), 0),
            inv_stock.version + count(*), count(*), ?6
     FROM json_each(?3) AS c WHERE c.key BETWEEN p.lo - 1 AND p.hi - 1 AND c.value <= inv_stock.available)
FROM (SELECT w.value AS wh, k.value AS sku, lo.value AS lo, hi.value AS hi
      FROM json_each(?1) AS w JOIN json_each(?2) AS k ON k.key = w.key
      JOIN json_each(?4) AS lo ON lo.key = w.key JOIN json_each(?5) AS hi ON hi.key = w.key) AS p
WHERE inv_stock.warehouse_id = p.wh AND inv_stock.sku_id = p.sku
RETURNING warehouse_id, sku_id, on_hand, available, reserved, sold, returned, version, last_grant;

-- name: ReservationInsertMany
-- ?1: [[order line, warehouse, sku, qty, state, stock version], ...];
-- ?2 now, ?3 the expiry of a granted reservation (a failed one expires now).
INSERT INTO inv_reservation (order_line, warehouse_id, sku_id, qty, state, version, stock_version, expires_at,
                             check_after, created_at, updated_at)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'),
       json_extract(value, '$[3]'), json_extract(value, '$[4]'), 1, json_extract(value, '$[5]'),
       CASE WHEN json_extract(value, '$[4]') = 'reserved' THEN ?3 ELSE ?2 END,
       CASE WHEN json_extract(value, '$[4]') = 'reserved' THEN ?3 ELSE ?2 END, ?2, ?2
FROM json_each(?1) ORDER BY key
RETURNING id, order_line;

-- name: LedgerInsertMany
-- ?1: [[intent, warehouse, sku, movement, qty, d_on_hand, d_available,
-- d_reserved, d_sold, d_returned, stock version, reservation, reason,
-- actor], ...]; ?2 the time.
INSERT INTO inv_ledger (intent, warehouse_id, sku_id, movement, qty, d_on_hand, d_available, d_reserved, d_sold,
                        d_returned, stock_version, reservation_id, reason, actor, at)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'), json_extract(value, '$[3]'),
       json_extract(value, '$[4]'), json_extract(value, '$[5]'), json_extract(value, '$[6]'), json_extract(value, '$[7]'),
       json_extract(value, '$[8]'), json_extract(value, '$[9]'), json_extract(value, '$[10]'), json_extract(value, '$[11]'),
       json_extract(value, '$[12]'), json_extract(value, '$[13]'), ?2
FROM json_each(?1) ORDER BY key
RETURNING id, intent;

-- name: HistoryInsertMany
-- ?1: [[reservation, version, from, to, action, ledger or null, detail, actor], ...]; ?2 the time.
INSERT INTO inv_reservation_history (reservation_id, version, from_state, to_state, action, ledger_id, detail, actor, at)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'), json_extract(value, '$[3]'),
       json_extract(value, '$[4]'), json_extract(value, '$[5]'), json_extract(value, '$[6]'), json_extract(value, '$[7]'), ?2
FROM json_each(?1);
