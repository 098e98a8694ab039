-- Reconciliation: the four sources read as of a cutoff.

-- name: BillDelete
DELETE FROM pay_bill_line WHERE channel = $1 AND day = $2;

-- name: BillInsert
INSERT INTO pay_bill_line (channel, day, event, merchant_id, payment_no, transaction_id, refund_no, refund_id,
                           amount_minor, fee_minor, currency, state, at, fetched_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14);

-- name: BillLines
SELECT channel, day, event, merchant_id, payment_no, transaction_id, refund_no, refund_id, amount_minor, fee_minor,
       currency, state, at
FROM pay_bill_line WHERE fetched_at <= $1 ORDER BY channel, day, id;

-- name: BillDays
SELECT DISTINCT channel, day FROM pay_bill_line WHERE fetched_at <= $1;

-- name: ReconPayments
-- Every payment with what the ledger and the order say of it.
SELECT p.payment_no, p.order_id, p.channel, p.merchant_id, p.amount_minor, p.currency, p.state,
       COALESCE(p.transaction_id, ''), p.paid_at, p.created_at,
       COALESCE((SELECT SUM(j.amount_minor) FROM pay_journal j WHERE j.entry_key IN ('payment:' || p.payment_no || ':capture', 'payment:' || p.payment_no || ':late') AND j.posted_at <= $1), 0),
       COALESCE((SELECT j.amount_minor FROM pay_journal j WHERE j.entry_key = 'payment:' || p.payment_no || ':capture:reversal' AND j.posted_at <= $1), 0),
       COALESCE(o.state, ''), COALESCE(o.amount_minor, 0)
FROM pay_payment p LEFT JOIN pay_order o ON o.id = p.order_id
WHERE p.created_at <= $1
ORDER BY p.payment_no;

-- name: ReconRefunds
SELECT r.refund_no, r.payment_no, r.amount_minor, r.currency, r.state, r.updated_at, p.channel, p.merchant_id,
       COALESCE((SELECT j.amount_minor FROM pay_journal j WHERE j.entry_key = 'refund:' || r.refund_no || ':settle' AND j.posted_at <= $1), 0)
FROM pay_refund r JOIN pay_payment p ON p.payment_no = r.payment_no
WHERE r.created_at <= $1
ORDER BY r.refund_no;

-- name: CompensationInsert
INSERT INTO pay_compensation (action_id, discrepancy, kind, subject, amount_minor, currency, detail, executed_by, executed_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (action_id) DO NOTHING;

-- name: CompensationsSettled
-- Operator adjudications that settle a key with the evidence they saw.
SELECT subject, detail FROM pay_compensation WHERE kind = 'adjudicate' AND executed_at <= $1;
