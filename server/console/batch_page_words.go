package console

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module/web"
)

// fieldWords name the fields a batch's filter and preview commonly hold
// (the engine's own BatchPreview and the modules' filters); a field not
// named here is shown under its own name, never as JSON.
var fieldWords = map[string][2]string{
	"hits":          {"命中记录", "matching records"},
	"eligible":      {"将处理", "to process"},
	"rule_skipped":  {"按规则跳过", "skipped by rule"},
	"by_state":      {"按状态", "by state"},
	"by_status":     {"按状态", "by status"},
	"distinct_keys": {"涉及的键", "distinct keys"},
	"apps":          {"涉及的应用", "applications"},
	"earliest":      {"最早记录时间", "earliest record"},
	"kind":          {"类型", "kind"},
	"snapshot_at":   {"快照时间", "snapshot at"},
	"delivered":     {"其中已投递", "already delivered"},
	"tag":           {"标签", "tag"},
	"app_id":        {"应用", "application"},
	"enterprise_id": {"企业", "enterprise"},
	"status":        {"状态", "status"},
	"keyword":       {"关键词", "keyword"},
	"date_from":     {"开始日期", "from"},
	"date_to":       {"结束日期", "to"},
	"queue":         {"队列", "queue"},
}

// field is one readable line of a filter or a preview.
type field struct {
	Name, Raw, Value string
}

// fieldsOf turns a JSON object into named lines (nested objects as
// "a 3 · b 4"); what is not an object is one line of its text. Empty
// values are left out: a filter's unset field selects nothing.
func fieldsOf(v *view, raw json.RawMessage) []field {
	var m map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		if len(raw) == 0 || string(raw) == "null" {
			return nil
		}
		return []field{{Name: "—", Value: string(raw)}}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []field
	for _, k := range keys {
		val := valueWords(v, m[k])
		if val == "" {
			continue
		}
		name := k
		if w, ok := fieldWords[k]; ok {
			name = pick(v.Lang, w, true, k)
		} else if st := stateWord(v.Lang, keeltype.JobState(k)); st != k {
			name = st // a by_state count of the engine's job states
		} else {
			name = strings.ReplaceAll(k, "_", " ")
		}
		out = append(out, field{Name: name, Raw: k, Value: val})
	}
	return out
}

func valueWords(v *view, x any) string {
	switch t := x.(type) {
	case nil:
		return ""
	case string:
		if ts, err := time.Parse(time.RFC3339Nano, t); err == nil {
			return web.TimeZoned(v.Lang, ts) // a time in a line of words: with its zone
		}
		return t
	case float64:
		if t == 0 {
			return "0"
		}
		return fmt.Sprintf("%.0f", t)
	case bool:
		if t {
			return pick(v.Lang, [2]string{"是", "yes"}, true, "")
		}
		return pick(v.Lang, [2]string{"否", "no"}, true, "")
	case map[string]any:
		parts := []string{}
		for _, f := range fieldsOf(v, mustJSON(t)) {
			parts = append(parts, f.Name+" "+f.Value)
		}
		return strings.Join(parts, " · ")
	case []any:
		parts := []string{}
		for _, e := range t {
			if s := valueWords(v, e); s != "" {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, "、")
	}
	return fmt.Sprint(x)
}

func mustJSON(x any) json.RawMessage {
	b, _ := json.Marshal(x)
	return b
}

// subjectWord is an item's subject as its business id: sources pad
// numeric ids with zeros so the engine's subject order is the ids' order
// (000000000123 is record 123).
func subjectWord(s string) string {
	if s == "" {
		return s
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return s
		}
	}
	if t := strings.TrimLeft(s, "0"); t != "" {
		return t
	}
	return "0"
}

// durationWords says a duration in words (6 分 29 秒, 6 min 29 s): the
// one formatter, module/web's.
func durationWords(lang string, d time.Duration) string { return web.Duration(lang, d) }

// previewFields are a preview's counts; the filter, snapshot and creator
// are shown on their own lines and its token is not the operator's to read.
func previewFields(v *view, raw json.RawMessage) []field {
	var out []field
	for _, f := range fieldsOf(v, raw) {
		switch f.Raw {
		case "token", "filter", "expires_at", "operator", "kind", "snapshot_at", "allowed_statuses":
			continue
		}
		out = append(out, f)
	}
	return out
}
