package payment

import (
	"github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/modules/payment/channel"
)

// fieldWords name the fields the module writes in reconciliation evidence
// and event payloads, so the console's evidence table and event pages say
// 手续费 where the JSON says fee_minor. TestEvidenceFieldsHaveWords walks
// the evidence of every class of discrepancy and the event types.
var fieldWords = map[string][2]string{
	// The refund jobs' arguments.
	"call":           {"第几次发起", "Call number"},
	"n":              {"第几次查询", "Query number"},
	"payment_no":     {"支付单号", "Payment no."},
	"refund_no":      {"退款单号", "Refund no."},
	"order_id":       {"订单号", "Order"},
	"merchant_id":    {"商户号", "Merchant"},
	"transaction_id": {"渠道交易号", "Channel transaction"},
	"refund_id":      {"渠道退款号", "Channel refund"},
	"channel":        {"渠道", "Channel"},
	"amount_minor":   {"金额", "Amount"},
	"fee_minor":      {"手续费", "Fee"},
	"net_minor":      {"净额", "Net"},
	"settle_minor":   {"结算金额", "Settled"},
	"capture_minor":  {"已入账金额", "Booked"},
	"reversed_minor": {"已冲正金额", "Reversed"},
	"currency":       {"币种", "Currency"},
	"state":          {"状态", "State"},
	"day":            {"账单日", "Bill day"},
	"at":             {"时间", "At"},
	"paid_at":        {"支付时间", "Paid at"},
	"first_at":       {"首次回调时间", "First callback"},
	"lines":          {"账单行数", "Bill lines"},
	"rows":           {"账单行", "Bill line"},
	"found":          {"找到", "Found"},
	"booked":         {"已入账", "Booked"},
	"changed":        {"已变更", "Changed"},
	"callbacks":      {"回调次数", "Callbacks"},
	"sha256":         {"回调摘要", "Callback digest"},
	"late":           {"关闭后到账", "Late"},
	"reason":         {"原因", "Reason"},
}

func init() {
	web.RegisterFields(Name, fieldWords)
	states := map[string][2]string{
		string(channel.StateNotPaid):    {"未支付", "not paid"},
		string(channel.StateRefunding):  {"退款中", "refunding"},
		string(channel.StateRefundFail): {"退款失败", "refund failed"},
	}
	for s, w := range stateWords {
		if s != "" {
			states[s] = [2]string{w.zh, w.en}
		}
	}
	web.RegisterFieldValues(Name, "state", states)
	channels := map[string][2]string{}
	for c, w := range channelWords {
		channels[c] = [2]string{w.zh, w.en}
	}
	web.RegisterFieldValues(Name, "channel", channels)
}
