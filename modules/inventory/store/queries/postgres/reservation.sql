-- Reservations and their history. Moves are conditional on the state
-- (and, for the timeout release, on the version read when it was chosen).

-- name: ReservationInsert
INSERT INTO inv_reservation (order_line, warehouse_id, sku_id, qty, state, version, stock_version, expires_at,
                             check_after, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, 1, $6, $7, $7, $8, $8)
RETURNING id;

-- name: ReservationGet
SELECT id, order_line, warehouse_id, sku_id, qty, state, version, stock_version, expires_at, check_after, checks,
       created_at, updated_at
FROM inv_reservation WHERE id = $1;

-- name: ReservationByLine
SELECT id, order_line, warehouse_id, sku_id, qty, state, version, stock_version, expires_at, check_after, checks,
       created_at, updated_at
FROM inv_reservation WHERE order_line = $1;

-- name: ReservationList
SELECT id, order_line, warehouse_id, sku_id, qty, state, version, stock_version, expires_at, check_after, checks,
       created_at, updated_at
FROM inv_reservation WHERE ($1 = '' OR state = $1) AND id < $2 ORDER BY id DESC LIMIT $3;

-- name: ReservationMove
UPDATE inv_reservation SET state = $3, version = version + 1, updated_at = $4
WHERE id = $1 AND state = $2
RETURNING version;

-- name: ReservationMoveAt
-- The timeout release: only if still in $2 at the version it was checked at.
UPDATE inv_reservation SET state = $3, version = version + 1, updated_at = $5
WHERE id = $1 AND state = $2 AND version = $4
RETURNING version;

-- name: ReservationDue
SELECT id, version FROM inv_reservation WHERE state = 'reserved' AND check_after <= $1 ORDER BY check_after LIMIT $2;

-- name: ReservationDelay
-- With ReservationRecheck: "(state = 'reserved') IS TRUE" keeps the
-- lookup on the primary key. A plain state test is an index condition of
-- inv_reservation_due (state, check_after), and analyzed while nothing was
-- reserved the generic plan walked every reserved row for this one
-- (TestPlansAfterAnalyze).
-- An unknown answer: check again later; not a release.
UPDATE inv_reservation SET check_after = $3, checks = checks + 1, updated_at = $4
WHERE id = $1 AND version = $2 AND (state = 'reserved') IS TRUE;

-- name: ReservationCounts
SELECT state, count(*) FROM inv_reservation GROUP BY state;

-- name: HistoryInsert
INSERT INTO inv_reservation_history (reservation_id, version, from_state, to_state, action, ledger_id, detail, actor, at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9);

-- name: HistoryList
SELECT version, from_state, to_state, action, COALESCE(ledger_id, 0), detail, actor, at
FROM inv_reservation_history WHERE reservation_id = $1 ORDER BY version;

-- name: ReservationRecheck
-- The order goes on: check again later (not an unknown answer).
UPDATE inv_reservation SET check_after = $3, updated_at = $4
WHERE id = $1 AND version = $2 AND (state = 'reserved') IS TRUE;
