package payment

import "github.com/keelwork/keel/module/web"

// The system actor this module's own background work is recorded under
// (payment and refund history, approvals it requests).
func init() {
	web.RegisterSystemActors(map[string][2]string{
		"system:payment": {"系统（支付）", "system (payment)"},
	})
}
