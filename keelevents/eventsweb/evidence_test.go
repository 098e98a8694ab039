package eventsweb

import (
	"encoding/json"
	"testing"

	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/web"
)

// TestEvidenceMarksOnlyDisagreement: a field is marked as differing only
// when two sources hold it with different values; a field only some
// sources have is shown with "—" elsewhere and not marked. Amounts in
// minor units beside a currency read as money.
func TestEvidenceMarksOnlyDisagreement(t *testing.T) {
	ev := map[string]json.RawMessage{
		"ours":    json.RawMessage(`{"amount_minor":39900,"currency":"CNY","state":"paid","payment_no":"P1"}`),
		"channel": json.RawMessage(`{"amount_minor":39901,"currency":"CNY","state":"paid","fee_minor":239,"payment_no":"P1"}`),
		"ledger":  json.RawMessage(`{"capture_minor":39900,"currency":"CNY"}`),
		"orders":  json.RawMessage(`{"state":"paid","order_id":"O1"}`),
	}
	tb := Evidence(ev)
	if tb.Sources[0] != "ours" {
		t.Fatalf("sources %v: ours first", tb.Sources)
	}
	rows := map[string]EvidenceRow{}
	for _, r := range tb.Rows {
		rows[r.Field] = r
	}
	for f, want := range map[string]bool{"amount_minor": true, "currency": false, "state": false, "payment_no": false,
		"fee_minor": false, "order_id": false, "capture_minor": false} {
		r, ok := rows[f]
		if !ok {
			t.Fatalf("no row %s in %+v", f, tb.Rows)
		}
		if r.Differs != want {
			t.Errorf("%s %v: differs %v, want %v", f, r.Values, r.Differs, want)
		}
	}
	if v := rows["amount_minor"].Values; v[0] != "399.00 CNY" || v[1] != "399.01 CNY" {
		t.Errorf("amounts %v; want money", v)
	}
}

// TestSuggestedWords: the console shows a suggestion's words without the
// action code and evidence fingerprint a reconciler keeps for Execute.
func TestSuggestedWords(t *testing.T) {
	for in, want := range map[string]string{
		"金额不符: 人工核实 (adjudge) [2026120424374000000000222001 39901 CNY 1]": "金额不符: 人工核实",
		"补记: 按原支付事件号补记入账分录 (book)":                                        "补记: 按原支付事件号补记入账分录",
		"人工核实回调与支付单不一致的原因, 必要时原路退回差额; 执行即登记核实结论":                          "人工核实回调与支付单不一致的原因, 必要时原路退回差额; 执行即登记核实结论",
		"按渠道金额调整 (见附件)":                                                   "按渠道金额调整 (见附件)",
		"[only a fingerprint]":                                            "[only a fingerprint]",
	} {
		if got := SuggestedWords(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// TestSuggestedInTheOperatorsLanguage: a suggestion reads in the page's
// language: the half of a "中文 / English" pair, or the words the
// reconciler's module registered; else as written.
func TestSuggestedInTheOperatorsLanguage(t *testing.T) {
	web.RegisterReasons("suggesttest", web.SystemReason{Text: `金额不符: 人工核实`, ZH: "金额不符: 人工核实", EN: "Amounts differ: check by hand"})
	zh, en := base{V: &module.View{Lang: "zh"}}, base{V: &module.View{Lang: "en"}}
	for _, c := range []struct {
		b          base
		reconciler string
		in, want   string
	}{
		{zh, "suggesttest.channel", "金额不符: 人工核实 (adjudge) [fp 1]", "金额不符: 人工核实"},
		{en, "suggesttest.channel", "金额不符: 人工核实 (adjudge) [fp 1]", "Amounts differ: check by hand"},
		{en, "other.channel", "金额不符: 人工核实 (adjudge)", "金额不符: 人工核实"},
		{zh, "inventory.stock", "核对出库数量 / check the shipped quantity", "核对出库数量"},
		{en, "inventory.stock", "核对出库数量 / check the shipped quantity", "check the shipped quantity"},
		{en, "x.y", "settle A / B by hand", "settle A / B by hand"},
	} {
		if got := c.b.Suggested(c.reconciler, c.in); got != c.want {
			t.Errorf("%s %s %q: %q, want %q", c.b.V.Lang, c.reconciler, c.in, got, c.want)
		}
	}
}
