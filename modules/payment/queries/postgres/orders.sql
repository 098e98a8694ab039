-- The module's own business orders: created with a payment order, marked
-- paid by the orders consumer through the inbox.

-- name: OrderInsert
INSERT INTO pay_order (id, amount_minor, currency, state, created_at)
VALUES ($1, $2, $3, 'awaiting_payment', $4)
ON CONFLICT (id) DO NOTHING;

-- name: OrderGet
SELECT id, amount_minor, currency, state, COALESCE(payment_no, ''), COALESCE(paid_event, ''), created_at, paid_at
FROM pay_order WHERE id = $1;

-- name: OrderMarkPaid
-- Conditional: a second paid event for the order changes nothing.
UPDATE pay_order SET state = 'paid', payment_no = $2, paid_event = $3, paid_at = $4
WHERE id = $1 AND state = 'awaiting_payment';

-- name: OrderMarkPaidMany
-- OrderMarkPaid for a batch of success events in one statement, each order
-- once (the caller keeps the first event of an order).
UPDATE pay_order o SET state = 'paid', payment_no = v.payment_no, paid_event = v.event_id, paid_at = $4
FROM unnest($1::text[], $2::text[], $3::text[]) AS v (id, payment_no, event_id)
WHERE o.id = v.id AND o.state = 'awaiting_payment';
