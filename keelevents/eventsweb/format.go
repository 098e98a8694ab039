package eventsweb

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/module/web"
)

// minorDigits is how many decimals a currency's minor unit has (ISO 4217);
// a currency not listed has two.
var minorDigits = map[string]int{"JPY": 0, "KRW": 0, "VND": 0, "CLP": 0, "ISK": 0, "BHD": 3, "KWD": 3, "OMR": 3, "JOD": 3, "TND": 3}

// Money formats an amount in minor units with its currency: 1234567 CNY →
// "12,345.67 CNY".
func Money(minor int64, currency string) string {
	if currency == "" {
		if minor == 0 {
			return "—"
		}
		return groupDigits(strconv.FormatInt(minor, 10))
	}
	digits, ok := minorDigits[currency]
	if !ok {
		digits = 2
	}
	sign := ""
	if minor < 0 {
		sign, minor = "-", -minor
	}
	s := strconv.FormatInt(minor, 10)
	if digits == 0 {
		return sign + groupDigits(s) + " " + currency
	}
	for len(s) <= digits {
		s = "0" + s
	}
	return sign + groupDigits(s[:len(s)-digits]) + "." + s[len(s)-digits:] + " " + currency
}

func groupDigits(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// When formats a time in zone and names the zone as every console page
// does, so that a reader knows which clock it is: "2026-12-01 17:05:03
// 北京时间" ("… UTC+8" in English, "… Asia/Tokyo UTC+9" for another zone).
func When(lang string, t time.Time, zone *time.Location) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(zone).Format(web.TimeLayout) + " " + web.ZoneName(lang, zone)
}

// Age formats a duration for people: "3 秒", "2 分 5 秒", "1 小时 4 分".
func Age(d time.Duration, en bool) string {
	if d <= 0 {
		return "—"
	}
	d = d.Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	unit := func(n int, zh, e string) string {
		if en {
			return fmt.Sprintf("%d%s", n, e)
		}
		return fmt.Sprintf("%d %s", n, zh)
	}
	switch {
	case h > 0:
		return unit(h, "小时", "h") + " " + unit(m, "分", "m")
	case m > 0:
		return unit(m, "分", "m") + " " + unit(s, "秒", "s")
	}
	return unit(s, "秒", "s")
}

// EvidenceTable lays each source's snapshot side by side: one row per
// field (nested objects flattened with dots), one column per source.
type EvidenceTable struct {
	Sources []string
	Rows    []EvidenceRow
	// Labels are the sources in the reader's words (In).
	Labels []string
}

// EvidenceRow is one field across the sources; Differs marks a field that
// two sources hold with different values. A source without the field
// (shown "—") does not disagree: each source keeps its own fields (the
// channel's bill has a fee, our payment an order), and marking every such
// row would hide the one field that does differ.
type EvidenceRow struct {
	Field   string
	Values  []string
	Differs bool
	// Label is Field in the reader's words (In); empty until then.
	Label string
}

// In says the table in lang with scope's registered field and value words
// (web.RegisterFields, web.RegisterFieldValues): each row's label, its
// coded values, and its RFC 3339 times in zone the way the console shows
// times. Differs was decided on the stored values and stays.
func (t EvidenceTable) In(lang, scope string, zone *time.Location) EvidenceTable {
	out := EvidenceTable{Sources: t.Sources, Rows: make([]EvidenceRow, len(t.Rows)), Labels: make([]string, len(t.Sources))}
	for i, src := range t.Sources {
		if _, ok := sourceWords[src]; ok {
			out.Labels[i] = sourceWords.in(src, lang)
		} else {
			out.Labels[i] = web.FieldWord(lang, scope, src)
		}
	}
	for i, r := range t.Rows {
		r.Label = web.FieldWord(lang, scope, r.Field)
		vals := make([]string, len(r.Values))
		for j, v := range r.Values {
			vals[j] = valueIn(lang, scope, r.Field, v, zone)
		}
		r.Values = vals
		out.Rows[i] = r
	}
	return out
}

func valueIn(lang, scope, field, v string, zone *time.Location) string {
	if len(v) >= 20 && v[4] == '-' && v[10] == 'T' {
		if at, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return at.In(zone).Format(web.TimeLayout) + " " + web.ZoneName(lang, zone)
		}
	}
	return web.FieldValueWord(lang, scope, field, v)
}

// Scope is the module whose words say a reconciler's or a topic's fields:
// the name before the first dot ("payment.channel" → "payment").
func Scope(name string) string {
	scope, _, _ := strings.Cut(name, ".")
	return scope
}

// Evidence builds the table; "ours" comes first, the other sources in
// name order.
func Evidence(ev map[string]json.RawMessage) EvidenceTable {
	var t EvidenceTable
	for src := range ev {
		t.Sources = append(t.Sources, src)
	}
	sort.Slice(t.Sources, func(i, j int) bool {
		if (t.Sources[i] == "ours") != (t.Sources[j] == "ours") {
			return t.Sources[i] == "ours"
		}
		return t.Sources[i] < t.Sources[j]
	})
	flat := make([]map[string]string, len(t.Sources))
	fields := map[string]bool{}
	for i, src := range t.Sources {
		var v any
		_ = json.Unmarshal(ev[src], &v)
		flat[i] = map[string]string{}
		flatten("", v, flat[i])
		moneyFields(v, "", flat[i])
		for f := range flat[i] {
			fields[f] = true
		}
	}
	names := make([]string, 0, len(fields))
	for f := range fields {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
		row := EvidenceRow{Field: f}
		held := ""
		for i := range t.Sources {
			val, ok := flat[i][f]
			if !ok {
				val = "—"
			}
			if val != "—" {
				if held != "" && val != held {
					row.Differs = true
				}
				held = val
			}
			row.Values = append(row.Values, val)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// moneyFields shows an integer amount field ("amount", "*_amount", or
// "*_minor", minor units by name) beside a "currency" field of the same
// object as money, not minor units.
func moneyFields(v any, prefix string, out map[string]string) {
	if list, ok := v.([]any); ok { // a bill's lines, each with its currency
		for i, e := range list {
			moneyFields(e, fmt.Sprintf("%s[%d]", prefix, i), out)
		}
		return
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return
	}
	cur, _ := obj["currency"].(string)
	for k, val := range obj {
		name := k
		if prefix != "" {
			name = prefix + "." + k
		}
		if n, isNum := val.(float64); isNum && cur != "" && (k == "amount" || strings.HasSuffix(k, "_amount") || strings.HasSuffix(k, "_minor")) && n == float64(int64(n)) {
			out[name] = Money(int64(n), cur)
			continue
		}
		moneyFields(val, name, out)
	}
}

func flatten(prefix string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 && prefix != "" {
			out[prefix] = "—"
		}
		for k, val := range x {
			name := k
			if prefix != "" {
				name = prefix + "." + k
			}
			flatten(name, val, out)
		}
	case []any:
		if len(x) == 0 {
			out[prefix] = "—"
		}
		for i, val := range x {
			flatten(fmt.Sprintf("%s[%d]", prefix, i), val, out)
		}
	case string:
		out[prefix] = x
	case nil:
		out[prefix] = "—"
	case bool:
		out[prefix] = strconv.FormatBool(x)
	case float64:
		out[prefix] = strconv.FormatFloat(x, 'f', -1, 64)
	default:
		out[prefix] = fmt.Sprint(x)
	}
}

// words maps codes to Chinese and English.
type words map[string][2]string

var stateWords = words{
	string(keelrecon.StateOpen):             {"未对平", "Open"},
	string(keelrecon.StateAutoHealed):       {"已自动修复", "Auto-healed"},
	string(keelrecon.StateAwaitingApproval): {"待审批", "Awaiting approval"},
	string(keelrecon.StateApproved):         {"已批准", "Approved"},
	string(keelrecon.StateExecuted):         {"已执行", "Executed"},
	string(keelrecon.StateVerified):         {"已核实", "Verified"},
	string(keelrecon.StateRejected):         {"已驳回", "Rejected"},
	string(keelrecon.StateResolved):         {"已自行消除", "Resolved by itself"},
}

var classWords = words{
	string(keelrecon.MissingOurs):    {"我方缺失", "Missing on our side"},
	string(keelrecon.MissingTheirs):  {"对方缺失", "Missing on theirs"},
	string(keelrecon.Duplicate):      {"重复", "Duplicate"},
	string(keelrecon.AmountMismatch): {"金额不符", "Amount mismatch"},
	string(keelrecon.StatusMismatch): {"状态不符", "Status mismatch"},
	string(keelrecon.Other):          {"其他", "Other"},
}

var approvalWords = words{
	string(keelrecon.ApprovalPending):   {"待审批", "Pending"},
	string(keelrecon.ApprovalApproved):  {"已批准", "Approved"},
	string(keelrecon.ApprovalRejected):  {"已驳回", "Rejected"},
	string(keelrecon.ApprovalExecuted):  {"已执行", "Executed"},
	string(keelrecon.ApprovalCancelled): {"已撤销", "Cancelled"},
}

var runWords = words{
	"running":   {"执行中", "Running"},
	"succeeded": {"已完成", "Succeeded"},
	"failed":    {"失败", "Failed"},
	"schedule":  {"定时", "Scheduled"},
	"manual":    {"手动", "Manual"},
}

var sourceWords = words{
	"ours":    {"我方", "Ours"},
	"theirs":  {"对方", "Theirs"},
	"channel": {"渠道", "Channel"},
	"ledger":  {"账务", "Ledger"},
	"order":   {"订单", "Order"},
	"orders":  {"订单", "Orders"},
	"carrier": {"承运商", "Carrier"},
	"bank":    {"银行", "Bank"},
}

func (w words) in(code, lang string) string {
	p, ok := w[code]
	if !ok {
		return code
	}
	if lang == "en" {
		return p[1]
	}
	return p[0]
}

// machineTail is what a reconciler may append to its suggestion for its
// own Execute (keelrecon.Discrepancy.SuggestedAction): the action's code
// in parentheses and the evidence's fingerprint in brackets.
var machineTail = regexp.MustCompile(`(?: \([a-z][a-z0-9_]*\))?(?: \[[^\]]*\])?$`)

// SuggestedWords is a suggestion as the operator reads it: its words,
// without the code and fingerprint the reconciler keeps for Execute.
func SuggestedWords(s string) string {
	if w := strings.TrimSpace(machineTail.ReplaceAllString(s, "")); w != "" {
		return w
	}
	return s
}
