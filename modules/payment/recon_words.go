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

// historyReasons are the reasons the module writes into a payment's and a
// refund's state history (payments.go, refunds.go, sweep.go, demo.go).
var historyReasons = []web.SystemReason{
	{Text: `created`, ZH: "创建支付单", EN: "Payment created"},
	{Text: `callback (?P<tx>\S+)`, ZH: "渠道回调确认支付（交易号 {tx}）", EN: "The channel's callback confirmed it (transaction {tx})"},
	{Text: `query (?P<tx>\S+)`, ZH: "向渠道查单确认支付（交易号 {tx}）", EN: "A query to the channel confirmed it (transaction {tx})"},
	{Text: `recon (?P<tx>\S+)`, ZH: "对账补记确认支付（交易号 {tx}）", EN: "Reconciliation confirmed it (transaction {tx})"},
	{Text: `late success (?P<tx>\S+) after close`, ZH: "关闭后渠道仍报支付成功（交易号 {tx}），转人工核验", EN: "The channel reported success after the close (transaction {tx}); held for review"},
	{Text: `timeout: channel confirmed unpaid and closed`, ZH: "超时未支付：渠道确认未付款并已关单", EN: "Timed out: the channel confirmed it unpaid and closed it"},
	{Text: `demo: channel confirmed unpaid and closed`, ZH: "演示：渠道确认未付款并已关单", EN: "Demo: the channel confirmed it unpaid and closed it"},
	{Text: `requested: (?P<reason>.*)`, ZH: "发起退款：{reason}", EN: "Refund requested: {reason}"},
	{Text: `call interrupted: query first`, ZH: "退款调用中断：先向渠道查询再决定", EN: "The refund call was interrupted: query before anything else"},
	{Text: `channel refused: (?P<error>.*)`, ZH: "渠道拒绝退款：{error}", EN: "The channel refused the refund: {error}"},
	{Text: `refund call outcome unknown`, ZH: "退款调用结果未知，转为查询", EN: "The refund call's outcome is unknown: querying"},
	{Text: `channel confirmed the refund`, ZH: "渠道确认退款成功", EN: "The channel confirmed the refund"},
	{Text: `query confirmed the refund`, ZH: "查询确认退款成功", EN: "A query confirmed the refund"},
	{Text: `refund callback`, ZH: "渠道退款回调确认成功", EN: "The channel's refund callback confirmed it"},
	{Text: `reconciliation: channel confirmed the refund`, ZH: "对账补记：渠道确认退款成功", EN: "Reconciliation: the channel confirmed the refund"},
	{Text: `not executed, call budget spent`, ZH: "渠道未执行且调用次数已用尽，转人工核验", EN: "Not executed and the call budget is spent: held for review"},
	{Text: `query proved it not executed: retry with the same number`, ZH: "查询证实未执行：用同一退款单号重新发起", EN: "A query proved it not executed: retrying with the same number"},
	{Text: `outcome still unknown past the horizon`, ZH: "超过查询期限仍无结果，转人工核验", EN: "Still unknown past the query horizon: held for review"},
}

func init() {
	web.RegisterReasons(Name, historyReasons...)
	rs := make([]web.SystemReason, len(suggestionWords))
	for i, w := range suggestionWords {
		rs[i] = web.SystemReason{Text: regexp.QuoteMeta(w[0]), ZH: w[0], EN: w[1]}
	}
	web.RegisterReasons(Name, rs...)
}
