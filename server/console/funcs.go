package console

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/keelwork/keel/keelevents/eventsweb"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/server/api"
)

var funcs = template.FuncMap{
	"state":    func(v *view, s keeltype.JobState) string { return stateWord(v.Lang, s) },
	"breaker":  breakerWord,
	"pauseWhy": func(v *view, r string) string { return pauseReasonWord(v.Lang, r) },
	"bstate":   func(v *view, s keeltype.BatchState) string { return batchStateWord(v.Lang, s) },
	"outcome":  func(v *view, o keeltype.BatchOutcome) string { return outcomeWord(v.Lang, o) },
	"outcomes": func() []keeltype.BatchOutcome { return keeltype.AllBatchOutcomes },
	"ocount":   func(m map[keeltype.BatchOutcome]int64, o keeltype.BatchOutcome) int64 { return m[o] },
	"pct":      func(f float64) string { return fmt.Sprintf("%.1f%%", f) },
	"rate1":    func(f float64) string { return fmt.Sprintf("%.2f", f) },
	"when":     when,
	"thead": func(v *view, key string) string {
		return web.TimeHead(v.Lang, word("zh", key), word("en", key), beijing)
	},
	"whenp": func(t *time.Time) string { return whenPtr(t) },
	// whenz is a time outside a time column (in a sentence): with its zone.
	"whenz":  func(v *view, t any) string { return web.TimeZoned(v.Lang, t) },
	"age":    func(v *view, seconds float64) string { return age(v.Lang, seconds) },
	"dur":    durText,
	"action": func(v *view, a string) string { return web.ActionWord(v.Lang, a) },
	"actor":  func(v *view, a string) string { return web.ActorWord(v.Lang, a) },
	"bkind":  func(v *view, k string) string { return web.BatchKindWord(v.Lang, k) },
	// jkind and qname name a job kind and a queue in words; the templates
	// keep the identifier in the cell's title and in links and filters.
	"jkind":  func(v *view, k string) string { return web.JobKindWord(v.Lang, k) },
	"qname":  func(v *view, q string) string { return web.QueueWord(v.Lang, q) },
	"jkinds": web.JobKinds,
	"qnames": web.Queues,
	"target": func(v *view, a string) string { return web.TargetWord(v.Lang, a) },
	"wait":   func(v *view, r string) string { return web.WaitReasonWord(v.Lang, r) },
	"reason": reasonWord,
	// jobmsg is one entry of a job's error history in words, as the
	// reason beside its state is (the raw text stays in the cell's title).
	"jobmsg":  func(v *view, kind, msg string) string { return jobReason(v, kind, msg) },
	"eclass":  func(v *view, c any) string { return web.ErrorClassWord(v.Lang, keeltype.ErrorClass(fmt.Sprint(c))) },
	"fields":  fieldsOf,
	"pfields": previewFields,
	"subject": subjectWord,
	"pretty":  pretty,
	"jfields": jobFields,
	"keyerr":  keyError,
	"why":     why,
	"esc":     url.PathEscape,
	"chart":   chart,
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[fmt.Sprint(kv[i])] = kv[i+1]
		}
		return m
	},
	"count":  func(m map[keeltype.JobState]int64, s keeltype.JobState) int64 { return m[s] },
	"states": func() []keeltype.JobState { return keeltype.AllJobStates },
	"live": func() []keeltype.JobState {
		return []keeltype.JobState{keeltype.JobStateAvailable, keeltype.JobStateRunning, keeltype.JobStateScheduled,
			keeltype.JobStateRetryable, keeltype.JobStateWaiting, keeltype.JobStateUnknown, keeltype.JobStateManual}
	},
}

func breakerWord(v *view, b keeltype.BreakerState) string {
	w, ok := breakerWords[b]
	if !ok {
		return string(b)
	}
	if v.Lang == langEN {
		return w[1]
	}
	return w[0]
}

// beijing is how times are shown: operators read Beijing time (the
// module kit's one display zone).
var beijing = web.DisplayZone

func when(t time.Time) string { return web.Time(t) }

func whenPtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return when(*t)
}

// age is a queue's or key's oldest waiting age in words (6 分 29 秒).
func age(lang string, seconds float64) string {
	return web.Duration(lang, time.Duration(seconds*float64(time.Second)))
}

// durText says a Go duration the API carries as text ("30s") in words.
func durText(v *view, s string) string {
	d, err := time.ParseDuration(s)
	if err != nil {
		return s
	}
	return web.Duration(v.Lang, d)
}

func pretty(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "—"
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// keyError is a flow key's last error in words: any kind on the key may
// have written it, so each module's registered reasons are tried (then
// the engine's); what none of them says reads as written.
func keyError(v *view, text string) string {
	if text == "" {
		return "—"
	}
	for _, scope := range web.ReasonScopes() {
		if w := jobReason(v, scope+".", text); w != text {
			return w
		}
	}
	return jobReason(v, "", text)
}

// jobField is one field of a job's arguments or result in words.
type jobField struct{ Field, Label, Value string }

// jobFields lays a job's arguments or result out as fields in the words
// its kind's module registered (web.RegisterFields under the kind's first
// segment: "delivery.push" reads the delivery module's), the way the
// event and reconciliation pages lay out payloads: nested fields by path,
// times in the console's zone, coded values and booleans in words, a
// skip's reason as the reason beside the state says it. The stored JSON
// stays one click away on the page (its raw-value fold).
func jobFields(v *view, kind string, raw json.RawMessage) []jobField {
	var x any
	if len(raw) == 0 || json.Unmarshal(raw, &x) != nil || x == nil {
		return nil
	}
	switch x.(type) {
	case map[string]any, []any:
	case string: // RecordResult of a sentence: in the module's words if it has them
		return []jobField{{Label: word(v.Lang, "value"), Value: jobReason(v, kind, x.(string))}}
	default: // a bare number or boolean
		return []jobField{{Label: word(v.Lang, "value"), Value: valueWords(v, x)}}
	}
	stored := eventsweb.Payload(raw)
	t := stored.In(v.Lang, eventsweb.Scope(kind), beijing)
	out := make([]jobField, 0, len(t.Rows))
	for i, r := range t.Rows {
		f := jobField{Field: r.Field, Label: r.Label, Value: r.Values[0]}
		switch r.Field {
		case "skip_reason": // keel.JobSkip's result
			f.Label = word(v.Lang, "skip_reason")
			f.Value = jobReason(v, kind, stored.Rows[i].Values[0])
		case "reconciler": // a reconciliation run's
			f.Value = web.ReconcilerWord(v.Lang, stored.Rows[i].Values[0])
		}
		out = append(out, f)
	}
	return out
}

// why is the reason shown next to a job's state: every skip, failure and
// wait says why.
func why(v *view, j *api.Job) string {
	last := ""
	if n := len(j.Errors); n > 0 {
		last = j.Errors[n-1].Message
	}
	switch j.State {
	case keeltype.JobStateWaiting:
		w := web.WaitReasonWord(v.Lang, j.WaitReason)
		if w == j.WaitReason { // not one of the engine's: the module's words, if any
			w = jobReason(v, j.Kind, w)
		}
		return word(v.Lang, "wait_reason") + ": " + w
	case keeltype.JobStateSkipped:
		return word(v.Lang, "skip_reason") + ": " + jobReason(v, j.Kind, resultText(j.Result))
	case keeltype.JobStateFailed, keeltype.JobStateManual, keeltype.JobStateRetryable, keeltype.JobStateUnknown:
		if last == "" {
			last = resultText(j.Result)
		}
		return word(v.Lang, "fail_reason") + ": " + jobReason(v, j.Kind, last)
	case keeltype.JobStateCancelled:
		if last != "" {
			return word(v.Lang, "reason") + ": " + jobReason(v, j.Kind, last)
		}
	}
	return ""
}

// jobReason says a job's skip, failure or cancel reason in words: the
// words the kind's module registered for it ("delivery.push" is the
// delivery module's), else the engine's, else as the worker wrote it.
func jobReason(v *view, kind, text string) string {
	scope, _, _ := strings.Cut(kind, ".")
	if w := web.ReasonWord(v.Lang, scope, text, nil); w != text {
		return w
	}
	// The engine's outcome wrappers (keel.JobFail's "failed: ",
	// JobCancel's "cancelled: ", JobPermanent's "permanent: ",
	// JobUnknown's "result unknown: ") repeat what the state or failure
	// class beside the reason says: the words of what they wrap, if it
	// has any.
	for _, p := range []string{"failed: ", "cancelled: ", "permanent: ", "result unknown: "} {
		if rest, ok := strings.CutPrefix(text, p); ok {
			if w := web.ReasonWord(v.Lang, scope, rest, nil); w != rest {
				return w
			}
		}
	}
	return text
}

// resultText is a job's result as text: a string as it is, a skip's
// {"skip_reason": code} as its code (keel.JobSkip), anything else as its
// JSON.
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var skip struct {
		Reason *string `json:"skip_reason"`
	}
	if json.Unmarshal(raw, &skip) == nil && skip.Reason != nil {
		return *skip.Reason
	}
	if len(raw) == 0 {
		return "—"
	}
	return string(raw)
}

// reasonWord says a reason the system wrote in words (by the code in the
// audit context, or by its text for older rows); a person's reason, and
// anything without registered words, reads as written. action's namespace
// ("reservation.slot_create") picks the module whose words apply.
func reasonWord(v *view, text string, action string, raw json.RawMessage) string {
	var ctx map[string]any
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &ctx)
	}
	scope, _, ok := strings.Cut(action, ".")
	if !ok || scope == "batch" || scope == "flowkey" || scope == "job" || scope == "queue" {
		scope = ""
	}
	return web.ReasonWord(v.Lang, scope, text, ctx)
}
