package payment

import "github.com/keelwork/keel/module/web"

// The system actor this module's own background work is recorded under
// (payment and refund history, approvals it requests).
func init() {
	// A callback's actor is the channel that sent it ("channel:wechat").
	actors := map[string][2]string{}
	for code, w := range channelWords {
		actors["channel:"+code] = [2]string{"渠道 " + w.zh, "channel " + w.en}
	}
	web.RegisterSystemActors(actors)
	web.RegisterTopics(map[string][2]string{
		TopicPaid:          {"支付成功", "Payment succeeded"},
		TopicLate:          {"迟到的支付成功", "Late payment success"},
		TopicRefundStarted: {"退款已发起", "Refund started"},
		TopicRefundDone:    {"退款成功", "Refund succeeded"},
		TopicRefundFailed:  {"退款失败", "Refund failed"},
		TopicFee:           {"渠道扣除手续费", "Channel fee kept"},
		TopicFeeReturn:     {"渠道退回手续费", "Channel fee returned"},
	})
	web.RegisterConsumers(map[string][2]string{
		ConsumerLedger: {"记账", "Ledger"},
		ConsumerOrders: {"订单状态同步", "Order updates"},
	})
	web.RegisterReconcilers(map[string][2]string{
		ReconChannel:   {"渠道账单四方对账", "Channel bill, four ways"},
		ReconCallbacks: {"回调与支付单核对", "Callbacks against payment orders"},
		ReconIntraday:  {"日内增量对账", "Intraday reconciliation"},
	})
	web.RegisterJobKinds(map[string][2]string{
		"payment.refund.call":  {"向渠道发起退款", "Ask the channel for a refund"},
		"payment.refund.query": {"向渠道查询退款结果", "Ask the channel for a refund's result"},
	})
	web.RegisterSystemActors(map[string][2]string{
		"system:payment": {"系统（支付）", "system (payment)"},
	})
}
