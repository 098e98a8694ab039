package payment

// Payment order states.
const (
	PayPending = "pending" // 待支付
	PayPaid    = "paid"    // 支付成功
	PayClosed  = "closed"  // 已关闭
	PayManual  = "manual"  // 人工核验
)

// Refund states.
const (
	RefundProcessing = "processing" // 退款处理中
	RefundDone       = "refunded"   // 已退款
	RefundUnknown    = "unknown"    // 结果未知
	RefundManual     = "manual"     // 人工核验
	RefundFailed     = "failed"     // 退款失败: the channel refused it, the amount is free again
)

// Order states.
const (
	OrderAwaiting = "awaiting_payment"
	OrderPaid     = "paid"
)

// Callback outcomes, as recorded in the evidence.
const (
	OutcomeApplied   = "applied"   // moved the payment or refund
	OutcomeDuplicate = "duplicate" // the same fact again: acknowledged, no effect
	OutcomeLate      = "late"      // success for a closed payment: 人工核验
	OutcomeMismatch  = "mismatch"  // verified but disagreeing: nothing changed, a discrepancy opens
	OutcomeIgnored   = "ignored"   // verified, but not a state that moves anything (NOTPAY)
)

type words struct{ zh, en string }

var stateWords = map[string]words{
	PayPending:       {"待支付", "awaiting payment"},
	PayPaid:          {"支付成功", "paid"},
	PayClosed:        {"已关闭", "closed"},
	PayManual:        {"人工核验", "manual review"},
	RefundProcessing: {"退款处理中", "refund in progress"},
	RefundDone:       {"已退款", "refunded"},
	RefundUnknown:    {"结果未知", "outcome unknown"},
	RefundFailed:     {"退款失败", "refund refused"},
	OrderAwaiting:    {"待付款", "awaiting payment"},
	"":               {"—", "—"},
}

// refund states reuse "manual" with the same words; "paid" for orders too.

var outcomeWords = map[string]words{
	OutcomeApplied:     {"已生效", "applied"},
	OutcomeDuplicate:   {"重复回调", "duplicate"},
	OutcomeLate:        {"关闭后到账", "late success"},
	OutcomeMismatch:    {"字段不一致", "fields disagree"},
	"mismatch_settled": {"字段不一致(已处理)", "fields disagreed (settled)"},
	OutcomeIgnored:     {"未改变状态", "no change"},
}

var channelWords = map[string]words{
	"wechat": {"微信支付", "WeChat Pay"},
	"alipay": {"支付宝", "Alipay"},
	"stripe": {"Stripe", "Stripe"},
}

// StateWord is a state in the operator's words.
func StateWord(state, lang string) string { return pick(stateWords, state, lang) }

func pick(m map[string]words, k, lang string) string {
	w, ok := m[k]
	if !ok {
		return k
	}
	if lang == "en" {
		return w.en
	}
	return w.zh
}
