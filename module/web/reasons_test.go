package web_test

import (
	"testing"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module/web"
)

// TestReasonWord: a system reason reads by its stored code and context
// when it has them, by its text when it has not (older rows), in the
// scope's words before the engine's, and a person's reason as typed.
func TestReasonWord(t *testing.T) {
	if web.ReasonCodeKey != keel.ReasonCodeKey {
		t.Fatalf("the engine stores its codes under %q, the console reads %q", keel.ReasonCodeKey, web.ReasonCodeKey)
	}
	web.RegisterReasons("reasontest",
		web.SystemReason{Code: "reasontest.moved", Text: `moved (?P<n>\d+) items`, ZH: "移动了 {n} 项", EN: "moved {n} items"},
		web.SystemReason{Text: `counters drifted from items`, ZH: "模块自己的说法", EN: "the module's own words"})
	cases := []struct {
		lang, scope, text string
		ctx               map[string]any
		want              string
	}{
		{"zh", "reasontest", "whatever the text", map[string]any{web.ReasonCodeKey: "reasontest.moved", "n": float64(3)}, "移动了 3 项"},
		{"en", "reasontest", "moved 12 items", nil, "moved 12 items"},
		{"zh", "reasontest", "moved 12 items", nil, "移动了 12 项"},
		{"zh", "reasontest", "counters drifted from items", nil, "模块自己的说法"},
		{"en", "", "counters drifted from items", nil, "The counters disagreed with the items and were corrected from them"},
		{"zh", "", "7 consecutive failures reached the threshold of 5", nil, "连续失败 7 次，达到自动暂停阈值 5"},
		{"zh", "", "x", map[string]any{web.ReasonCodeKey: keel.ReasonFailureThreshold, "consecutive_failures": float64(2)},
			"连续失败 2 次，达到自动暂停阈值 —"},
		{"zh", "reasontest", "客户要求补推", nil, "客户要求补推"},
		{"zh", "", "moved 12 items", nil, "moved 12 items"},
		{"zh", "", "a code nobody registered", map[string]any{web.ReasonCodeKey: "nobody.knows"}, "a code nobody registered"},
	}
	for _, c := range cases {
		if got := web.ReasonWord(c.lang, c.scope, c.text, c.ctx); got != c.want {
			t.Errorf("ReasonWord(%s, %q, %q, %v) = %q, want %q", c.lang, c.scope, c.text, c.ctx, got, c.want)
		}
	}
}

// TestReconReasonWords: a reason the reconciliation wrote reads in words
// in both languages, from its stored code and run number (a large run
// number as written, not in exponent form), and so does an older row that
// has only the English text; an operator's own reason, or the same text
// under another namespace's action, is shown as written; every registered
// code reads differently in the two languages.
func TestReconReasonWords(t *testing.T) {
	coded := map[string]any{web.ReasonCodeKey: "recon.not_found", "reason_arg": float64(42)}
	for _, c := range []struct {
		lang, scope, reason string
		ctx                 map[string]any
		want                string
	}{
		{"zh", "recon", "not found by run 42", coded, "第 42 次对账运行未再发现"},
		{"en", "recon", "not found by run 42", coded, "not found by run 42"},
		{"zh", "recon", "found by run 7", nil, "第 7 次对账运行发现"},
		{"zh", "recon", "found by run 1000000", map[string]any{web.ReasonCodeKey: "recon.found", "reason_arg": float64(1e6)}, "第 1000000 次对账运行发现"},
		{"zh", "recon", "found again by run 9", map[string]any{"from": "verified"}, "第 9 次对账运行再次发现"},
		{"zh", "recon", "manual", nil, "手动运行"},
		{"zh", "approval", "the discrepancy is gone (run 3)", nil, "对账差异已消失（第 3 次运行），申请撤回"},
		{"zh", "recon", "核实渠道账单, 同意退款", nil, "核实渠道账单, 同意退款"},
		{"zh", "", "found by run 7", nil, "found by run 7"},
	} {
		if got := web.ReasonWord(c.lang, c.scope, c.reason, c.ctx); got != c.want {
			t.Errorf("%s %s %q: %q, want %q", c.lang, c.scope, c.reason, got, c.want)
		}
	}
	for _, code := range web.Reasons() {
		if code == "reasontest.moved" {
			continue
		}
		ctx := map[string]any{web.ReasonCodeKey: code, "reason_arg": 1}
		zh, en := web.ReasonWord("zh", "", "", ctx), web.ReasonWord("en", "", "", ctx)
		if zh == "" || en == "" || zh == en {
			t.Errorf("reason %s: zh %q en %q", code, zh, en)
		}
	}
}
