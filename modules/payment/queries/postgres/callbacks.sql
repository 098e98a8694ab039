-- Callback evidence and the security audit.

-- name: CallbackInsert
INSERT INTO pay_callback (channel, event, notify_id, payment_no, refund_no, transaction_id, amount_minor, currency,
                          outcome, detail, digest, body, received_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13);

-- name: CallbackList
SELECT id, channel, event, notify_id, payment_no, refund_no, transaction_id, amount_minor, currency, outcome,
       detail, digest, body, received_at
FROM pay_callback WHERE payment_no = $1 ORDER BY id;

-- name: CallbackCount
SELECT COUNT(*) FROM pay_callback WHERE payment_no = $1 AND outcome = $2;

-- name: CallbackMismatches
-- Verified callbacks whose fields disagree with the payment order, one per
-- (payment, transaction, amount, currency), up to the cutoff.
SELECT payment_no, transaction_id, amount_minor, currency, MIN(detail), MIN(digest), MIN(received_at), COUNT(*)
FROM pay_callback WHERE outcome = 'mismatch' AND received_at <= $1
GROUP BY payment_no, transaction_id, amount_minor, currency
ORDER BY payment_no, transaction_id;

-- name: CallbackMismatchSettle
UPDATE pay_callback SET outcome = 'mismatch_settled' WHERE payment_no = $1 AND transaction_id = $2 AND outcome = 'mismatch';

-- name: SecurityInsert
INSERT INTO pay_security_audit (channel, reason, detail, digest, body, remote, received_at)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: SecurityList
SELECT id, channel, reason, detail, digest, body, remote, received_at FROM pay_security_audit
WHERE ($1 = 0 OR id < $1) ORDER BY id DESC LIMIT $2;

-- name: SecurityCount
SELECT COUNT(*) FROM pay_security_audit;
