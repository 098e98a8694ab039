-- Refunds: one stable refund number per request, states moved by
-- conditional updates with history.

-- name: RefundByRequest
SELECT refund_no FROM pay_refund WHERE payment_no = $1 AND request_id = $2;

-- name: RefundInsert
INSERT INTO pay_refund (refund_no, payment_no, request_id, amount_minor, currency, state, reason, created_by,
                        created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, 'processing', $6, $7, $8, $8);

-- name: RefundGet
SELECT refund_no, payment_no, request_id, amount_minor, currency, state, reason, channel_refund_id, calls, queries,
       version, unknown_since, last_error, created_by, created_at, updated_at
FROM pay_refund WHERE refund_no = $1;

-- name: RefundList
SELECT refund_no, payment_no, request_id, amount_minor, currency, state, reason, channel_refund_id, calls, queries,
       version, unknown_since, last_error, created_by, created_at, updated_at
FROM pay_refund
WHERE ($1 = '' OR state = $1) AND ($2 = '' OR payment_no = $2) AND ($3 = '' OR refund_no < $3)
ORDER BY refund_no DESC LIMIT $4;

-- name: RefundMove
-- unknown_since keeps the first moment the outcome became unknown: the
-- horizon to 人工核验 counts from there, whatever happens in between.
UPDATE pay_refund SET state = $3, version = version + 1, updated_at = $4, last_error = $5,
                      unknown_since = CASE WHEN $3 = 'unknown' THEN COALESCE(unknown_since, $4) ELSE unknown_since END,
                      channel_refund_id = CASE WHEN $6 = '' THEN channel_refund_id ELSE $6 END
WHERE refund_no = $1 AND state = $2
RETURNING version;

-- name: RefundCalled
UPDATE pay_refund SET calls = calls + 1, updated_at = $2 WHERE refund_no = $1 AND (state = 'processing') IS TRUE
RETURNING calls;

-- name: RefundQueried
UPDATE pay_refund SET queries = queries + 1, updated_at = $2 WHERE refund_no = $1 AND state IN ('unknown', 'processing')
RETURNING queries;

-- name: RefundHistoryInsert
INSERT INTO pay_refund_history (refund_no, version, from_state, to_state, reason, actor, at)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: RefundHistory
SELECT version, from_state, to_state, reason, actor, at FROM pay_refund_history WHERE refund_no = $1 ORDER BY version;

-- name: RefundStateCounts
SELECT state, COUNT(*), COALESCE(SUM(amount_minor), 0) FROM pay_refund GROUP BY state;

-- name: RefundSearch
SELECT refund_no, state FROM pay_refund WHERE refund_no = $1 OR channel_refund_id = $1 LIMIT 5;
