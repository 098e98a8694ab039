package console

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"time"

	"github.com/keelwork/keel/keeltype"
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
	"whenp":    func(t *time.Time) string { return whenPtr(t) },
	"age":      age,
	"fields":   fieldsOf,
	"pfields":  previewFields,
	"subject":  subjectWord,
	"pretty":   pretty,
	"why":      why,
	"esc":      url.PathEscape,
	"chart":    chart,
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

// beijing is how times are shown: operators read Beijing time.
var beijing = time.FixedZone("UTC+8", 8*3600)

func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(beijing).Format("2006-01-02 15:04:05")
}

func whenPtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return when(*t)
}

func age(seconds float64) string {
	if seconds <= 0 {
		return "—"
	}
	return (time.Duration(seconds) * time.Second).String()
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

// why is the reason shown next to a job's state: every skip, failure and
// wait says why.
func why(v *view, j *api.Job) string {
	last := ""
	if n := len(j.Errors); n > 0 {
		last = j.Errors[n-1].Message
	}
	switch j.State {
	case keeltype.JobStateWaiting:
		return word(v.Lang, "wait_reason") + ": " + j.WaitReason
	case keeltype.JobStateSkipped:
		return word(v.Lang, "skip_reason") + ": " + resultText(j.Result)
	case keeltype.JobStateFailed, keeltype.JobStateManual, keeltype.JobStateRetryable, keeltype.JobStateUnknown:
		if last == "" {
			last = resultText(j.Result)
		}
		return word(v.Lang, "fail_reason") + ": " + last
	case keeltype.JobStateCancelled:
		if last != "" {
			return word(v.Lang, "reason") + ": " + last
		}
	}
	return ""
}

func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if len(raw) == 0 {
		return "—"
	}
	return string(raw)
}
