DROP INDEX pay_journal_payment_order;
DROP INDEX pay_payment_updated;
DROP INDEX pay_bill_line_refund;
DROP INDEX pay_bill_line_payment;
DROP INDEX pay_refund_no_c;
DROP INDEX pay_payment_no_c;
