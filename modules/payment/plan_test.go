package payment

import (
	"testing"

	"github.com/keelwork/keel/module/moduletest"
)

// TestPlansAfterAnalyze: every statement that moves one payment or refund
// reads it by its key, on tables analyzed while none was pending (a quiet
// night: every payment settled) and read after a day's traffic made most
// of them pending. With a plain state test the planner could serve it
// from pay_payment_due (state, query_after) or pay_refund_state (state,
// updated_at), whose state the statistics show rare, and the generic plan
// a pooled session switches to walked every pending payment for the one a
// callback names: each callback costing as much as the whole day's open
// payments.
func TestPlansAfterAnalyze(t *testing.T) {
	payment, refund := []string{"pay_payment_pkey"}, []string{"pay_refund_pkey"}
	byOrder := []string{"pay_payment_order"}
	moduletest.RequireKeyLookups(t, testLines, queryFiles, []string{
		`INSERT INTO pay_order (id, amount_minor, currency, state, created_at)
		 SELECT 'o' || g, 100, 'CNY', 'paid', now() FROM generate_series(1, 20000) g`,
		`INSERT INTO pay_payment (payment_no, order_id, channel, merchant_id, app_id, amount_minor, currency, state,
		     expires_at, query_after, created_at, updated_at, transaction_id)
		 SELECT 'p' || g, 'o' || g, 'wechat', 'm', 'a', 100, 'CNY', 'manual', now(), now(), now(), now(), 't' || g
		 FROM generate_series(1, 20000) g`,
		`INSERT INTO pay_refund (refund_no, payment_no, request_id, amount_minor, currency, state, reason, created_by,
		     created_at, updated_at)
		 SELECT 'r' || g, 'p' || g, 'q', 10, 'CNY', 'succeeded', 'x', 'u', now(), now() FROM generate_series(1, 20000) g`,
		`ANALYZE pay_order`, `ANALYZE pay_payment`, `ANALYZE pay_refund`,
		`UPDATE pay_payment SET state = (ARRAY['pending', 'closed', 'paid'])[1 + abs(hashtext(payment_no)) % 3]`,
		`UPDATE pay_refund SET state = 'processing'`,
	},
		moduletest.Lookup{Statement: "PaymentSucceed", Relation: "pay_payment", Keys: payment},
		moduletest.Lookup{Statement: "PaymentLateSuccess", Relation: "pay_payment", Keys: payment},
		moduletest.Lookup{Statement: "PaymentClose", Relation: "pay_payment", Keys: payment},
		moduletest.Lookup{Statement: "PaymentQueried", Relation: "pay_payment", Keys: payment},
		// The batch's other read of pay_payment is the transaction id's
		// uniqueness probe.
		moduletest.Lookup{Statement: "PaymentSucceedMany", Relation: "pay_payment",
			Keys: []string{"pay_payment_pkey", "pay_payment_transaction_id_key"}},
		moduletest.Lookup{Statement: "PaymentPaidOfOrder", Relation: "pay_payment", Keys: byOrder},
		moduletest.Lookup{Statement: "IntradayPaymentByOrder", Relation: "pay_payment", Keys: byOrder},
		moduletest.Lookup{Statement: "RefundCalled", Relation: "pay_refund", Keys: refund})
}
