-- The reconciler merges the channel's bill with our payments and refunds in
-- payment (and refund) number order, a page at a time, so its memory is
-- bounded by a page and not by the number of transactions. Both sides and
-- the merge in Go must agree on the order: bytewise, hence COLLATE "C"
-- whatever the database's collation, and these indexes let each page start
-- where the last one ended instead of sorting the table again.
CREATE INDEX pay_payment_no_c ON pay_payment (payment_no COLLATE "C");
CREATE INDEX pay_refund_no_c ON pay_refund (refund_no COLLATE "C");
CREATE INDEX pay_bill_line_payment ON pay_bill_line (payment_no COLLATE "C", id) WHERE event <> 'refund';
CREATE INDEX pay_bill_line_refund ON pay_bill_line (refund_no COLLATE "C", id) WHERE event = 'refund';
-- The intraday incremental run reads the payments changed since the start
-- of the day, in this order.
CREATE INDEX pay_payment_updated ON pay_payment (updated_at, payment_no);
-- The ledger's entries in payment-number order, the fourth stream of the
-- merge.
CREATE INDEX pay_journal_payment_order ON pay_journal (payment_no COLLATE "C", id);
