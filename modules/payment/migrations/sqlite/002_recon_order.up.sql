-- The reconciler merges the channel's bill with our payments and refunds in
-- payment (and refund) number order, a page at a time, so its memory is
-- bounded by a page and not by the number of transactions. SQLite compares
-- text bytewise (BINARY), the order of the merge in Go; the primary keys
-- of pay_payment and pay_refund already serve their pages, these serve the
-- bill's.
CREATE INDEX pay_bill_line_payment ON pay_bill_line (payment_no, id) WHERE event <> 'refund';
CREATE INDEX pay_bill_line_refund ON pay_bill_line (refund_no, id) WHERE event = 'refund';
-- The intraday incremental run reads the payments changed since the start
-- of the day, in this order.
CREATE INDEX pay_payment_updated ON pay_payment (updated_at, payment_no);
-- The ledger's entries in payment-number order, the fourth stream of the
-- merge.
CREATE INDEX pay_journal_payment_order ON pay_journal (payment_no, id);
