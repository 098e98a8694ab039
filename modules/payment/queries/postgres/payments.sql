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
-- This statement and the others that name a payment or refund write their
-- state test as "(state = …) IS TRUE": the same rows, but not an index
-- condition, so the key is the only way in. With "state = 'pending'" and
-- statistics taken while none was pending, the generic plan walked
-- pay_payment_due over every pending payment for the one named (9–13 ms
-- per callback at 100,000 pending, against 0.1 ms; TestPlansAfterAnalyze).
UPDATE pay_payment SET state = 'paid', transaction_id = $2, paid_at = $3, source = $4,
                       version = version + 1, updated_at = $5
WHERE payment_no = $1 AND (state = 'pending') IS TRUE AND amount_minor = $6 AND currency = $7 AND merchant_id = $8
RETURNING version;

-- name: PaymentLateSuccess
-- 已关闭 + a verified success → 人工核验: the money arrived after we closed.
UPDATE pay_payment SET state = 'manual', transaction_id = $2, paid_at = $3, source = $4,
                       version = version + 1, updated_at = $5
WHERE payment_no = $1 AND (state = 'closed') IS TRUE AND amount_minor = $6 AND currency = $7 AND merchant_id = $8
RETURNING version;

-- name: PaymentClose
UPDATE pay_payment SET state = 'closed', source = $2, version = version + 1, updated_at = $3
WHERE payment_no = $1 AND (state = 'pending') IS TRUE
RETURNING version;

-- name: PaymentQueried
-- The next active query of a payment still pending.
UPDATE pay_payment SET queries = queries + 1, query_after = $2, updated_at = $3
WHERE payment_no = $1 AND (state = 'pending') IS TRUE;

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
SELECT payment_no FROM pay_payment WHERE order_id = $1 AND (state = 'paid') IS TRUE ORDER BY payment_no LIMIT 1;

-- name: PaymentSucceedMany
-- A batch of verified first successes (the callback group commit), one
-- per payment: the conditional move 待支付 → 支付成功 of each payment
-- whose channel, merchant, app, amount and currency match and whose
-- transaction id pays no other payment, with, in the same statement, the
-- moved payments' history rows and callback evidence. A row that matches
-- nothing is left for the one-callback path, which classifies it. Returns
-- what the outbox event of each moved payment carries.
WITH n AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[],
                         $8::timestamptz[], $9::timestamptz[], $10::text[], $11::text[], $12::text[], $13::text[],
                         $14::text[])
        AS n (payment_no, transaction_id, channel, merchant_id, app_id, amount_minor, currency, paid_at,
              received_at, notify_id, digest, body, actor, reason)
), moved AS (
    UPDATE pay_payment p SET state = 'paid', transaction_id = n.transaction_id, paid_at = n.paid_at, source = $15,
                             version = p.version + 1, updated_at = n.received_at
    FROM n
    WHERE p.payment_no = n.payment_no AND (p.state = 'pending') IS TRUE AND p.channel = n.channel
      AND p.merchant_id = n.merchant_id AND (n.app_id = '' OR p.app_id = '' OR p.app_id = n.app_id)
      AND p.amount_minor = n.amount_minor AND p.currency = n.currency
      AND NOT EXISTS (SELECT 1 FROM pay_payment o WHERE o.transaction_id = n.transaction_id)
    RETURNING p.payment_no, p.version, p.order_id, p.channel, p.merchant_id, p.amount_minor, p.currency,
              n.transaction_id, n.received_at, n.notify_id, n.digest, n.body, n.actor, n.reason
), hist AS (
    INSERT INTO pay_payment_history (payment_no, version, from_state, to_state, reason, actor, at)
    SELECT payment_no, version, 'pending', 'paid', reason, actor, received_at FROM moved
), evidence AS (
    INSERT INTO pay_callback (channel, event, notify_id, payment_no, refund_no, transaction_id, amount_minor, currency,
                              outcome, detail, digest, body, received_at)
    SELECT channel, 'payment', notify_id, payment_no, '', transaction_id, amount_minor, currency,
           'applied', '', digest, body, received_at FROM moved
)
SELECT payment_no, order_id, channel, merchant_id, transaction_id, amount_minor, currency FROM moved;
