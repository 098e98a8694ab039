package web

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// SystemReason is how a reason or detail the system writes (not a person) reads
// in words. A writer that can stores Code in the audit entry's context
// (ReasonCodeKey) beside its parameters, and the words are filled from
// them; Text is a regular expression over the stored English text, for
// rows written without a code (older rows, and module history texts that
// are plain columns), whose named groups are the parameters. ZH and EN
// name a parameter as {name}.
type SystemReason struct {
	Code   string
	Text   string
	ZH, EN string
}

// ReasonCodeKey is the audit context key that names a system reason's code.
const ReasonCodeKey = "reason_code"

type reason struct {
	SystemReason
	re *regexp.Regexp
}

var (
	reasonsByScope = map[string][]reason{}
	reasonsByCode  = map[string]reason{}
)

// RegisterReasons declares, at init, the words of the reasons scope writes
// ("" for the engine; a module its name). A code registered twice with
// other words panics, as actions do.
func RegisterReasons(scope string, rs ...SystemReason) {
	wordsMu.Lock()
	defer wordsMu.Unlock()
	for _, r := range rs {
		x := reason{SystemReason: r}
		if r.Text != "" {
			x.re = regexp.MustCompile("^(?s:" + r.Text + ")$")
		}
		if r.Code != "" {
			if old, ok := reasonsByCode[r.Code]; ok && (old.ZH != r.ZH || old.EN != r.EN) {
				panic(fmt.Sprintf("web: reason %q is already registered as %+v", r.Code, old.SystemReason))
			}
			reasonsByCode[r.Code] = x
		}
		reasonsByScope[scope] = append(reasonsByScope[scope], x)
	}
}

// ReasonScopes lists the scopes that registered reasons, sorted: for a
// text whose writer's scope a page does not know (a flow key's last
// error, which any kind on the key may have written).
func ReasonScopes() []string {
	wordsMu.RLock()
	defer wordsMu.RUnlock()
	out := make([]string, 0, len(reasonsByScope))
	for s := range reasonsByScope {
		if s != "" {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

var reasonParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// ReasonWord says a reason in lang: by its code and parameters when the
// writer stored them in ctx, else by the first of scope's (then the
// engine's) registered texts it matches, else as written — a reason a
// person typed is their own words.
func ReasonWord(lang, scope, text string, ctx map[string]any) string {
	wordsMu.RLock()
	defer wordsMu.RUnlock()
	if code, ok := ctx[ReasonCodeKey].(string); ok {
		if r, ok := reasonsByCode[code]; ok {
			return fill(lang, r, func(name string) (string, bool) {
				v, ok := ctx[name]
				if !ok {
					return "", false
				}
				return paramText(v), true
			})
		}
	}
	scopes := []string{scope}
	if scope != "" {
		scopes = append(scopes, "")
	}
	for _, s := range scopes {
		for _, r := range reasonsByScope[s] {
			if r.re == nil {
				continue
			}
			m := r.re.FindStringSubmatch(text)
			if m == nil {
				continue
			}
			return fill(lang, r, func(name string) (string, bool) {
				if i := r.re.SubexpIndex(name); i > 0 {
					return m[i], true
				}
				return "", false
			})
		}
	}
	return text
}

func fill(lang string, r reason, param func(string) (string, bool)) string {
	w := pick(lang, [2]string{r.ZH, r.EN}, true, "")
	return reasonParam.ReplaceAllStringFunc(w, func(p string) string {
		if v, ok := param(strings.Trim(p, "{}")); ok {
			return v
		}
		return "—"
	})
}

// paramText is a context parameter as written: a JSON number decoded as a
// float64 reads as an integer when it is one (run 1000000, not 1e+06).
func paramText(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// Reasons lists the registered reason codes, sorted (for tests).
func Reasons() []string {
	wordsMu.RLock()
	defer wordsMu.RUnlock()
	out := make([]string, 0, len(reasonsByCode))
	for c := range reasonsByCode {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}
