package payment

import (
	"regexp"

	"github.com/keelwork/keel/module/web"
)

// suggestionWords are the reconcilers' suggested actions in both
// languages. The stored suggestion is the Chinese (with the action code
// and evidence fingerprint Execute reads, see actionOf); the console
// shows it in the operator's language.
var suggestionWords = [][2]string{
	{"账务延迟: 支付成功超过时限仍未入账; 可按原支付事件号补记入账分录", "Ledger late: paid past the lag and still not booked; book the entry from the original payment event"},
	{"订单延迟: 支付成功超过时限订单仍未标记已支付; 可按原支付事件号标记", "Order late: paid past the lag and the order still not marked paid; mark it from the original payment event"},
	{"人工核实回调与支付单不一致的原因, 必要时原路退回差额; 执行即登记核实结论", "Find out why the callback disagrees with the payment, refund the difference if needed; executing records the finding"},
	{"渠道账单无此笔: 冲正入账分录", "Not in the channel's bill: reverse the ledger entry"},
	{"渠道账单重复: 人工核实, 执行即登记核实结论", "Twice in the channel's bill: check by hand; executing records the finding"},
	{"我方无此支付单: 人工核实", "No such payment here: check by hand"},
	{"金额不符: 人工核实", "Amounts differ: check by hand"},
	{"补记: 向渠道查单并按原事件号入账", "Heal: query the channel and book through the original event"},
	{"状态不符: 渠道已收款而订单已关闭, 原路退款", "States differ: the channel took the money for a closed order; refund it the way it came"},
	{"补记: 按原支付事件号补记入账分录", "Heal: book the entry from the original payment event"},
	{"补记: 按原支付事件号标记订单已支付", "Heal: mark the order paid from the original payment event"},
	{"状态不符: 人工核实", "States differ: check by hand"},
	{"渠道重复退款: 人工核实", "Refunded twice by the channel: check by hand"},
	{"我方无此退款单: 人工核实", "No such refund here: check by hand"},
	{"退款金额不符: 人工核实", "Refund amounts differ: check by hand"},
	{"补记: 向渠道查询退款并确认", "Heal: query the channel about the refund and confirm it"},
	{"日汇总不符: 人工核实", "Daily totals differ: check by hand"},
}

func init() {
	rs := make([]web.SystemReason, len(suggestionWords))
	for i, w := range suggestionWords {
		rs[i] = web.SystemReason{Text: regexp.QuoteMeta(w[0]), ZH: w[0], EN: w[1]}
	}
	web.RegisterReasons(Name, rs...)
}
