package web

import (
	"regexp"
	"strconv"
	"strings"
)

// Evidence and payloads are JSON a module writes with its own field names
// (amount_minor, merchant_id, rows[0].state); an operator deciding on a
// discrepancy reads them in words. A module registers the words of the
// fields it writes under its name, and of the coded values a field holds
// (state "refunded": 已退款); the console says a field path segment by
// segment and keeps the stored name in the cell's title.

var (
	fieldWords = map[string]map[string]Words{} // scope → field → words
	valueWords = map[string]map[string]Words{} // scope → field "=" value → words
)

// RegisterFields declares, at init, the words of the JSON fields scope
// (a module's name) writes in evidence and payloads: "fee_minor": {"手续费",
// "Fee"}. A field registered twice in one scope with other words panics.
func RegisterFields(scope string, m map[string][2]string) {
	register(scopeWords(fieldWords, scope), m, "field of "+scope)
}

// scopeWords is scope's table in byScope, made on first use.
func scopeWords(byScope map[string]map[string]Words, scope string) map[string]Words {
	wordsMu.Lock()
	defer wordsMu.Unlock()
	into := byScope[scope]
	if into == nil {
		into = map[string]Words{}
		byScope[scope] = into
	}
	return into
}

// RegisterFieldValues declares the words of the coded values field holds
// in scope's evidence: field "state", "refunded": {"已退款", "Refunded"}.
func RegisterFieldValues(scope, field string, m map[string][2]string) {
	keyed := make(map[string][2]string, len(m))
	for v, w := range m {
		keyed[field+"="+v] = w
	}
	register(scopeWords(valueWords, scope), keyed, "value of "+scope)
}

// segment is one step of a flattened path: a name and, for an array
// element, its index ("rows[0]").
var segment = regexp.MustCompile(`^([^\[\]]+)((?:\[\d+\])*)$`)

// FieldWord says a flattened field path ("rows[0].fee_minor") in lang
// with scope's words: each segment by its registered words, an array
// element with its position counted from one ("账单行 1 · 手续费"). A
// path none of whose segments has words reads as stored; a segment
// without words keeps its name beside the ones that have them.
func FieldWord(lang, scope, path string) string {
	wordsMu.RLock()
	defer wordsMu.RUnlock()
	fields := fieldWords[scope]
	if len(fields) == 0 || path == "" {
		return path
	}
	parts := strings.Split(path, ".")
	out := make([]string, len(parts))
	said := false
	for i, p := range parts {
		m := segment.FindStringSubmatch(p)
		if m == nil {
			out[i] = p
			continue
		}
		name, idx := m[1], m[2]
		w, ok := fields[name]
		if !ok {
			out[i] = p
			continue
		}
		said = true
		out[i] = w.In(lang)
		for _, n := range strings.Split(strings.Trim(idx, "[]"), "][") {
			if k, err := strconv.Atoi(n); err == nil {
				out[i] += " " + strconv.Itoa(k+1)
			}
		}
	}
	if !said {
		return path
	}
	return strings.Join(out, " · ")
}

// yesNo are a JSON boolean's words, for every field.
var yesNo = map[string][2]string{"true": {"是", "yes"}, "false": {"否", "no"}}

// FieldValueWord says a coded value of the field at path (its last
// segment's name decides) in lang, a boolean as yes or no, or the value
// as stored.
func FieldValueWord(lang, scope, path, value string) string {
	name := path
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	if m := segment.FindStringSubmatch(name); m != nil {
		name = m[1]
	}
	wordsMu.RLock()
	w, ok := valueWords[scope][name+"="+value]
	wordsMu.RUnlock()
	if !ok {
		if b, isBool := yesNo[value]; isBool {
			return pick(lang, b, true, value)
		}
		return value
	}
	return w.In(lang)
}
