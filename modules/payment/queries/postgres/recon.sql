-- Reconciliation: the four sources read as of a cutoff.

-- name: BillDelete
DELETE FROM pay_bill_line WHERE channel = $1 AND day = $2;

-- name: BillInsert
INSERT INTO pay_bill_line (channel, day, event, merchant_id, payment_no, transaction_id, refund_no, refund_id,
                           amount_minor, fee_minor, currency, state, at, fetched_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14);

-- Every page below is keyset-paged in bytewise order (COLLATE "C", whatever the database collation):
-- the reconciler merges the sources in Go by comparing the same keys, so
-- both sides must sort alike, and a page starts where the last one ended.

-- name: BillPaymentPage
-- The bill's payment lines after (payment_no, id), in that order.
SELECT id, channel, day, event, merchant_id, payment_no, transaction_id, refund_no, refund_id, amount_minor, fee_minor,
       currency, state, at
FROM pay_bill_line
WHERE fetched_at <= $1 AND event <> 'refund' AND (payment_no COLLATE "C", id) > ($2, $3)
ORDER BY payment_no COLLATE "C", id
LIMIT $4;

-- name: BillRefundPage
-- The bill's refund lines after (refund_no, id), in that order.
SELECT id, channel, day, event, merchant_id, payment_no, transaction_id, refund_no, refund_id, amount_minor, fee_minor,
       currency, state, at
FROM pay_bill_line
WHERE fetched_at <= $1 AND event = 'refund' AND (refund_no COLLATE "C", id) > ($2, $3)
ORDER BY refund_no COLLATE "C", id
LIMIT $4;

-- name: BillDays
SELECT DISTINCT channel, day FROM pay_bill_line WHERE fetched_at <= $1;

-- name: ReconPaymentPage
-- The payments after a payment number, each with its order (the ledger is
-- a stream of its own: JournalPaymentPage).
SELECT p.payment_no, p.order_id, p.channel, p.merchant_id, p.amount_minor, p.currency, p.state,
       COALESCE(p.transaction_id, ''), p.paid_at, p.created_at,
       COALESCE(o.state, ''), COALESCE(o.amount_minor, 0)
FROM pay_payment p LEFT JOIN pay_order o ON o.id = p.order_id
WHERE p.created_at <= $1 AND p.payment_no COLLATE "C" > $2
ORDER BY p.payment_no COLLATE "C"
LIMIT $3;

-- name: JournalPaymentPage
-- The ledger's entries after (payment_no, id), in that order: merged with
-- the payments in one pass over an index rather than probed by entry key
-- for every payment.
SELECT id, payment_no, entry_key, amount_minor
FROM pay_journal
WHERE posted_at <= $1 AND (payment_no COLLATE "C", id) > ($2, $3)
ORDER BY payment_no COLLATE "C", id
LIMIT $4;

-- name: ReconRefundPage
-- The refunds after a refund number, each with its settlement entry.
SELECT r.refund_no, r.payment_no, r.amount_minor, r.currency, r.state, r.updated_at, p.channel, p.merchant_id,
       COALESCE((SELECT j.amount_minor FROM pay_journal j WHERE j.entry_key = 'refund:' || r.refund_no || ':settle' AND j.posted_at <= $1), 0)
FROM pay_refund r JOIN pay_payment p ON p.payment_no = r.payment_no
WHERE r.created_at <= $1 AND r.refund_no COLLATE "C" > $2
ORDER BY r.refund_no COLLATE "C"
LIMIT $3;

-- name: CompensationInsert
INSERT INTO pay_compensation (action_id, discrepancy, kind, subject, amount_minor, currency, detail, executed_by, executed_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (action_id) DO NOTHING;

-- name: CompensationsSettled
-- Operator adjudications that settle a key with the evidence they saw.
SELECT subject, detail FROM pay_compensation WHERE kind = 'adjudicate' AND executed_at <= $1;

-- The intraday incremental run reads only what changed in its window, a
-- page at a time in (updated_at, payment_no) order, and rechecks its own
-- unsettled discrepancies one payment at a time.

-- name: IntradayPaymentPage
-- Payments changed in ($2, $1] after ($3, $4), with their ledger and order.
SELECT p.payment_no, p.order_id, p.channel, p.merchant_id, p.amount_minor, p.currency, p.state,
       COALESCE(p.transaction_id, ''), p.paid_at, p.created_at,
       COALESCE((SELECT SUM(j.amount_minor) FROM pay_journal j WHERE j.entry_key IN ('payment:' || p.payment_no || ':capture', 'payment:' || p.payment_no || ':late') AND j.posted_at <= $1), 0),
       COALESCE((SELECT j.amount_minor FROM pay_journal j WHERE j.entry_key = 'payment:' || p.payment_no || ':capture:reversal' AND j.posted_at <= $1), 0),
       COALESCE(o.state, ''), COALESCE(o.amount_minor, 0), p.updated_at
FROM pay_payment p LEFT JOIN pay_order o ON o.id = p.order_id
WHERE p.updated_at > $2 AND p.updated_at <= $1 AND (p.updated_at, p.payment_no) > ($3, $4)
ORDER BY p.updated_at, p.payment_no
LIMIT $5;

-- name: IntradayPaymentByNo
SELECT p.payment_no, p.order_id, p.channel, p.merchant_id, p.amount_minor, p.currency, p.state,
       COALESCE(p.transaction_id, ''), p.paid_at, p.created_at,
       COALESCE((SELECT SUM(j.amount_minor) FROM pay_journal j WHERE j.entry_key IN ('payment:' || p.payment_no || ':capture', 'payment:' || p.payment_no || ':late') AND j.posted_at <= $1), 0),
       COALESCE((SELECT j.amount_minor FROM pay_journal j WHERE j.entry_key = 'payment:' || p.payment_no || ':capture:reversal' AND j.posted_at <= $1), 0),
       COALESCE(o.state, ''), COALESCE(o.amount_minor, 0), p.updated_at
FROM pay_payment p LEFT JOIN pay_order o ON o.id = p.order_id
WHERE p.payment_no = $2 AND p.created_at <= $1;

-- name: IntradayPaymentByOrder
-- The paid payment of an order (an order is paid by one payment).
SELECT p.payment_no, p.order_id, p.channel, p.merchant_id, p.amount_minor, p.currency, p.state,
       COALESCE(p.transaction_id, ''), p.paid_at, p.created_at,
       COALESCE((SELECT SUM(j.amount_minor) FROM pay_journal j WHERE j.entry_key IN ('payment:' || p.payment_no || ':capture', 'payment:' || p.payment_no || ':late') AND j.posted_at <= $1), 0),
       COALESCE((SELECT j.amount_minor FROM pay_journal j WHERE j.entry_key = 'payment:' || p.payment_no || ':capture:reversal' AND j.posted_at <= $1), 0),
       COALESCE(o.state, ''), COALESCE(o.amount_minor, 0), p.updated_at
FROM pay_payment p LEFT JOIN pay_order o ON o.id = p.order_id
WHERE p.order_id = $2 AND (p.state = 'paid') IS TRUE AND p.created_at <= $1
ORDER BY p.payment_no
LIMIT 1;
