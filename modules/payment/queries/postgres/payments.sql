-- Payment orders and their state history. Every move is one conditional
-- UPDATE with the expected state in its WHERE.

-- name: PaymentInsert
INSERT INTO pay_payment (payment_no, order_id, channel, merchant_id, app_id, amount_minor, currency, state,
                         expires_at, query_after, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9, $10, $10)
ON CONFLICT (payment_no) DO NOTHING;

-- name: PaymentGet
SELECT payment_no, order_id, channel, merchant_id, app_id, amount_minor, currency, state,
       COALESCE(transaction_id, ''), refund_reserved, refunded_minor, refund_count, version, source,
       expires_at, query_after, queries, paid_at, created_at, updated_at
FROM pay_payment WHERE payment_no = $1;

-- name: PaymentByTransaction
SELECT payment_no FROM pay_payment WHERE transaction_id = $1;

-- name: PaymentList
SELECT payment_no, order_id, channel, merchant_id, app_id, amount_minor, currency, state,
       COALESCE(transaction_id, ''), refund_reserved, refunded_minor, refund_count, version, source,
       expires_at, query_after, queries, paid_at, created_at, updated_at
FROM pay_payment
WHERE ($1 = '' OR state = $1) AND ($2 = '' OR payment_no < $2)
ORDER BY payment_no DESC LIMIT $3;

-- name: PaymentSucceed
-- 待支付 → 支付成功, only for the fields the payment was created with:
-- a callback whose amount, currency or merchant differ matches nothing.
UPDATE pay_payment SET state = 'paid', transaction_id = $2, paid_at = $3, source = $4,
                       version = version + 1, updated_at = $5
WHERE payment_no = $1 AND state = 'pending' AND amount_minor = $6 AND currency = $7 AND merchant_id = $8
RETURNING version;

-- name: PaymentLateSuccess
-- 已关闭 + a verified success → 人工核验: the money arrived after we closed.
UPDATE pay_payment SET state = 'manual', transaction_id = $2, paid_at = $3, source = $4,
                       version = version + 1, updated_at = $5
WHERE payment_no = $1 AND state = 'closed' AND amount_minor = $6 AND currency = $7 AND merchant_id = $8
RETURNING version;

-- name: PaymentClose
UPDATE pay_payment SET state = 'closed', source = $2, version = version + 1, updated_at = $3
WHERE payment_no = $1 AND state = 'pending'
RETURNING version;

-- name: PaymentQueried
-- The next active query of a payment still pending.
UPDATE pay_payment SET queries = queries + 1, query_after = $2, updated_at = $3
WHERE payment_no = $1 AND state = 'pending';

-- name: PaymentDue
SELECT payment_no FROM pay_payment WHERE state = 'pending' AND query_after <= $1
ORDER BY query_after LIMIT $2;

-- name: PaymentReserveRefund
-- The refund's amount is reserved in the same statement that checks it
-- against what is left: two concurrent refunds cannot pass the paid amount.
UPDATE pay_payment SET refund_reserved = refund_reserved + $2, refund_count = refund_count + 1, updated_at = $3
WHERE payment_no = $1 AND state IN ('paid', 'manual') AND currency = $4 AND refund_reserved + $2 <= amount_minor
RETURNING refund_count;

-- name: PaymentReleaseRefund
UPDATE pay_payment SET refund_reserved = refund_reserved - $2, updated_at = $3
WHERE payment_no = $1 AND refund_reserved - $2 >= refunded_minor;

-- name: PaymentRefunded
UPDATE pay_payment SET refunded_minor = refunded_minor + $2, updated_at = $3
WHERE payment_no = $1 AND refunded_minor + $2 <= refund_reserved;

-- name: PaymentHistoryInsert
INSERT INTO pay_payment_history (payment_no, version, from_state, to_state, reason, actor, at)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: PaymentHistory
SELECT version, from_state, to_state, reason, actor, at FROM pay_payment_history
WHERE payment_no = $1 ORDER BY version;

-- name: PaymentStateCounts
SELECT state, COUNT(*) FROM pay_payment GROUP BY state;

-- name: PaymentSearch
SELECT payment_no, state FROM pay_payment WHERE payment_no = $1 OR transaction_id = $1 OR order_id = $1 LIMIT 5;

-- name: PaymentPaidOfOrder
SELECT payment_no FROM pay_payment WHERE order_id = $1 AND state = 'paid' ORDER BY payment_no LIMIT 1;
