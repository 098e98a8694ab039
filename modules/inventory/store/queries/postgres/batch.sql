-- The coalesced reservation path: a batch of requests, over one or many
-- (warehouse, SKU) pairs, in one transaction with one statement per kind
-- of row. Lists come as one JSON argument (the same on both databases);
-- rows are written in list order so that ids follow arrival order.

-- name: ActionClaimMany
-- $1: [[key, params], ...]. Claimed in key order: two batches sharing keys
-- (the same order line retried in two processes) wait for each other
-- instead of deadlocking. Returns the keys this batch claimed.
INSERT INTO inv_action (action_key, params, result, created_at)
SELECT e->>0, e->>1, '', $2::timestamptz FROM jsonb_array_elements($1::jsonb) AS e ORDER BY e->>0
ON CONFLICT (action_key) DO NOTHING
RETURNING action_key;

-- name: ActionGetMany
-- The key lists below are arrays (index lookups on the key; a JSON list
-- joined to the table was planned as a scan of every action).
SELECT action_key, params, result FROM inv_action WHERE action_key = ANY($1::text[]);

-- name: ActionResultMany
UPDATE inv_action a SET result = u.result FROM unnest($1::text[], $2::text[]) AS u(k, result) WHERE a.action_key = u.k;

-- name: ActionDeleteMany
-- Requests that go to the next batch (or on their own) give their keys back.
DELETE FROM inv_action WHERE action_key = ANY($1::text[]) AND result = '';

-- name: StockReserveMany
-- $1, $2: the pairs (each once); $3: every request's running total within
-- its pair, in arrival order; $4, $5: where each pair's totals start and
-- end in $3 (1-based, inclusive). The pairs' rows are locked first, in one
-- order (locked; the update touches a row only once locked has returned
-- it), so that batches of several processes over several pairs cannot
-- deadlock, without a round trip of its own. Per pair, every request whose
-- running total fits the available quantity is granted, against the row as
-- it is when this statement holds it (a concurrent change makes PostgreSQL
-- evaluate the SET again on the new row); last_grant says how many. A pair
-- without a row is not returned. Arrays, not JSON: unnest of an array is
-- estimated small, so the plan is a primary-key lookup per pair (EXPLAIN
-- showed a JSON list estimated at 100 rows hash-joined against a scan of
-- every balance).
WITH p AS (SELECT * FROM unnest($1::text[], $2::text[], $4::integer[], $5::integer[]) AS p(wh, sku, lo, hi)),
locked AS MATERIALIZED (
    SELECT s.warehouse_id, s.sku_id FROM inv_stock s JOIN p ON s.warehouse_id = p.wh AND s.sku_id = p.sku
    ORDER BY s.warehouse_id, s.sku_id
    FOR UPDATE OF s)
UPDATE inv_stock s SET (available, reserved, version, last_grant, updated_at) =
    (SELECT s.available - COALESCE(max(c), 0), s.reserved + COALESCE(max(c), 0), s.version + count(*), count(*),
            $6::timestamptz
     FROM unnest(($3::bigint[])[p.lo:p.hi]) AS c WHERE c <= s.available)
FROM locked l JOIN p ON p.wh = l.warehouse_id AND p.sku = l.sku_id
WHERE s.warehouse_id = l.warehouse_id AND s.sku_id = l.sku_id
RETURNING s.warehouse_id, s.sku_id, s.on_hand, s.available, s.reserved, s.sold, s.returned, s.version, s.last_grant;

-- name: ReservationInsertMany
-- $1: [[order line, warehouse, sku, qty, state, stock version], ...];
-- $2 now, $3 the expiry of a granted reservation (a failed one expires now).
INSERT INTO inv_reservation (order_line, warehouse_id, sku_id, qty, state, version, stock_version, expires_at,
                             check_after, created_at, updated_at)
SELECT x.e->>0, x.e->>1, x.e->>2, (x.e->>3)::bigint, x.e->>4, 1, (x.e->>5)::bigint,
       CASE WHEN x.e->>4 = 'reserved' THEN $3::timestamptz ELSE $2::timestamptz END,
       CASE WHEN x.e->>4 = 'reserved' THEN $3::timestamptz ELSE $2::timestamptz END, $2, $2
FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS x(e, ord)
ORDER BY x.ord
RETURNING id, order_line;

-- name: LedgerInsertMany
-- $1: [[intent, warehouse, sku, movement, qty, d_on_hand, d_available,
-- d_reserved, d_sold, d_returned, stock version, reservation, reason,
-- actor], ...]; $2 the time.
INSERT INTO inv_ledger (intent, warehouse_id, sku_id, movement, qty, d_on_hand, d_available, d_reserved, d_sold,
                        d_returned, stock_version, reservation_id, reason, actor, at)
SELECT x.e->>0, x.e->>1, x.e->>2, x.e->>3, (x.e->>4)::bigint, (x.e->>5)::bigint, (x.e->>6)::bigint,
       (x.e->>7)::bigint, (x.e->>8)::bigint, (x.e->>9)::bigint, (x.e->>10)::bigint, (x.e->>11)::bigint,
       x.e->>12, x.e->>13, $2::timestamptz
FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS x(e, ord)
ORDER BY x.ord
RETURNING id, intent;

-- name: HistoryInsertMany
-- $1: [[reservation, version, from, to, action, ledger or null, detail, actor], ...]; $2 the time.
INSERT INTO inv_reservation_history (reservation_id, version, from_state, to_state, action, ledger_id, detail, actor, at)
SELECT (e->>0)::bigint, (e->>1)::bigint, e->>2, e->>3, e->>4, (e->>5)::bigint, e->>6, e->>7, $2::timestamptz
FROM jsonb_array_elements($1::jsonb) AS e;

-- name: GrantedInsertMany
-- A batch's reservations and the granted ones' ledger rows in one round
-- trip: $1 the reservations as for ReservationInsertMany ($2 now, $3 the
-- expiry), $4 the ledger rows as for LedgerInsertMany with the order line
-- last instead of the reservation id (joined to the reservation just
-- written). Returns every reservation's id with its ledger row's id (null
-- for a failed one).
WITH r AS (
    INSERT INTO inv_reservation (order_line, warehouse_id, sku_id, qty, state, version, stock_version, expires_at,
                                 check_after, created_at, updated_at)
    SELECT x.e->>0, x.e->>1, x.e->>2, (x.e->>3)::bigint, x.e->>4, 1, (x.e->>5)::bigint,
           CASE WHEN x.e->>4 = 'reserved' THEN $3::timestamptz ELSE $2::timestamptz END,
           CASE WHEN x.e->>4 = 'reserved' THEN $3::timestamptz ELSE $2::timestamptz END, $2, $2
    FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS x(e, ord)
    ORDER BY x.ord
    RETURNING id, order_line),
l AS (
    INSERT INTO inv_ledger (intent, warehouse_id, sku_id, movement, qty, d_on_hand, d_available, d_reserved, d_sold,
                            d_returned, stock_version, reservation_id, reason, actor, at)
    SELECT x.e->>0, x.e->>1, x.e->>2, x.e->>3, (x.e->>4)::bigint, (x.e->>5)::bigint, (x.e->>6)::bigint,
           (x.e->>7)::bigint, (x.e->>8)::bigint, (x.e->>9)::bigint, (x.e->>10)::bigint, r.id,
           x.e->>12, x.e->>13, $2::timestamptz
    FROM jsonb_array_elements($4::jsonb) WITH ORDINALITY AS x(e, ord) JOIN r ON r.order_line = x.e->>11
    ORDER BY x.ord
    RETURNING id, reservation_id)
SELECT r.id, r.order_line, l.id FROM r LEFT JOIN l ON l.reservation_id = r.id;

-- name: FinishMany
-- The batch's history ($1 as for HistoryInsertMany, $2 the time) and its
-- keys' results ($3 keys, $4 results) in one round trip.
WITH h AS (
    INSERT INTO inv_reservation_history (reservation_id, version, from_state, to_state, action, ledger_id, detail, actor, at)
    SELECT (e->>0)::bigint, (e->>1)::bigint, e->>2, e->>3, e->>4, (e->>5)::bigint, e->>6, e->>7, $2::timestamptz
    FROM jsonb_array_elements($1::jsonb) AS e)
UPDATE inv_action a SET result = u.result FROM unnest($3::text[], $4::text[]) AS u(k, result) WHERE a.action_key = u.k;
