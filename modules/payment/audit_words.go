package payment

import "github.com/keelwork/keel/module/web"

// The system actor this module's own background work is recorded under
// (payment and refund history, approvals it requests).
func init() {
	web.RegisterJobKinds(map[string][2]string{
		"payment.refund.call":  {"向渠道发起退款", "Ask the channel for a refund"},
		"payment.refund.query": {"向渠道查询退款结果", "Ask the channel for a refund's result"},
	})
	web.RegisterSystemActors(map[string][2]string{
		"system:payment": {"系统（支付）", "system (payment)"},
	})
}
