DROP INDEX pay_journal_payment_order;
DROP INDEX pay_payment_updated;
DROP INDEX pay_bill_line_refund;
DROP INDEX pay_bill_line_payment;
