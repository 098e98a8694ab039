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

func init() {
	web.RegisterFields("evtest", map[string][2]string{"rows": {"账单行", "Bill line"}, "fee_minor": {"手续费", "Fee"},
		"at": {"时间", "At"}, "state": {"状态", "State"}, "books": {"账面", "Books"}})
	web.RegisterFieldValues("evtest", "state", map[string][2]string{"refunded": {"已退款", "refunded"}})
}

// TestEvidenceInWords: the table says its fields, sources and coded values
// in the reconciler's module's words, its times in the page's zone as the
// console shows them, and a bill line's amounts (in an array) as money;
// whether a row differs was decided on the stored values.
func TestEvidenceInWords(t *testing.T) {
	ev := map[string]json.RawMessage{
		"ours":  json.RawMessage(`{"state":"paid"}`),
		"books": json.RawMessage(`{"state":"refunded","rows":[{"fee_minor":-53,"currency":"CNY","at":"2026-12-04T04:22:35Z"}]}`),
	}
	tb := Evidence(ev).In("zh", Scope("evtest.channel"), web.DisplayZone)
	if len(tb.Labels) != 2 || tb.Labels[0] != "我方" || tb.Labels[1] != "账面" {
		t.Errorf("sources read %v", tb.Labels)
	}
	got := map[string]EvidenceRow{}
	for _, r := range tb.Rows {
		got[r.Field] = r
	}
	for field, want := range map[string][2]string{
		"rows[0].fee_minor": {"账单行 1 · 手续费", "-0.53 CNY"},
		"rows[0].at":        {"账单行 1 · 时间", "2026-12-04 12:22:35 北京时间"},
		"state":             {"状态", "已退款"},
	} {
		r, ok := got[field]
		if !ok {
			t.Fatalf("no row %s in %+v", field, tb.Rows)
		}
		if r.Label != want[0] || r.Values[len(r.Values)-1] != want[1] {
			t.Errorf("%s reads %q %v, want %q … %q", field, r.Label, r.Values, want[0], want[1])
		}
	}
	if !got["state"].Differs || got["state"].Values[0] != "paid" {
		t.Errorf("state row %+v: paid against refunded differs, and paid has no words here", got["state"])
	}
	if en := Evidence(ev).In("en", "evtest", web.DisplayZone); en.Labels[0] != "Ours" {
		t.Errorf("English sources %v", en.Labels)
	}
}

// TestPairInTheOperatorsLanguage: a run's scope written "中文 · English"
// reads as the page's half; one language, or a separator inside one
// language's text, reads as written.
func TestPairInTheOperatorsLanguage(t *testing.T) {
	zh, en := base{V: &module.View{Lang: "zh"}}, base{V: &module.View{Lang: "en"}}
	scope := "2026-12-04 00:00 UTC+8 起变更的支付 · payments changed since 2026-12-04 00:00 UTC+8"
	if got := zh.Pair(scope); got != "2026-12-04 00:00 UTC+8 起变更的支付" {
		t.Errorf("zh: %q", got)
	}
	if got := en.Pair(scope); got != "payments changed since 2026-12-04 00:00 UTC+8" {
		t.Errorf("en: %q", got)
	}
	for _, s := range []string{"payments · refunds", "支付 · 退款"} {
		if got := en.Pair(s); got != s {
			t.Errorf("%q read %q", s, got)
		}
	}
}
