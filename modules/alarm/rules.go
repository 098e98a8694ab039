package alarm

import (
	"fmt"
	"time"
)

// Severities, from least to most urgent. Severe (3) alarms bypass the
// aggregation window on their own lane.
const (
	SevInfo   = 1
	SevMinor  = 2
	SevSevere = 3
)

// Rule is one version of a threshold rule on a metric.
type Rule struct {
	ID      string  `json:"id"`
	Version int     `json:"version"`
	Metric  string  `json:"metric"`
	Op      string  `json:"op"` // "gt" or "lt"
	Warn    float64 `json:"warn"`
	// Crit, when set, is the severe threshold: a value beyond it is severe
	// at once (no hold-down).
	Crit     *float64 `json:"crit,omitempty"`
	Severity int      `json:"severity"` // of a value beyond Warn
	// Hold is how many consecutive breaching samples open an instance;
	// Recover how many consecutive clear ones recover it.
	Hold    int `json:"hold"`
	Recover int `json:"recover"`
	// NoDataSecs: an open instance without samples this long is 无数据
	// (not recovered). 0 = never.
	NoDataSecs int `json:"nodata_secs"`
	// MinValue and MaxValue bound a plausible reading; outside them the
	// sample is quarantined as absurd.
	MinValue  float64   `json:"min_value"`
	MaxValue  float64   `json:"max_value"`
	Note      string    `json:"note,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`
}

// Validate checks a rule before it is stored.
func (r *Rule) Validate() error {
	switch {
	case !idPattern.MatchString(r.ID):
		return fmt.Errorf("rule id %q is not [A-Za-z0-9_.-]{1,64}", r.ID)
	case !metricPattern.MatchString(r.Metric):
		return fmt.Errorf("metric %q is not [a-z][a-z0-9_.]{0,31}", r.Metric)
	case r.Op != "gt" && r.Op != "lt":
		return fmt.Errorf("op %q is neither gt nor lt", r.Op)
	case r.Severity < SevInfo || r.Severity > SevSevere:
		return fmt.Errorf("severity %d is not 1..3", r.Severity)
	case r.Hold < 1 || r.Hold > 1000 || r.Recover < 1 || r.Recover > 1000:
		return fmt.Errorf("hold and recover must be 1..1000")
	case r.NoDataSecs < 0:
		return fmt.Errorf("nodata_secs must not be negative")
	case r.MinValue >= r.MaxValue:
		return fmt.Errorf("min_value must be below max_value")
	case r.Warn < r.MinValue || r.Warn > r.MaxValue:
		return fmt.Errorf("warn threshold outside the plausible range")
	}
	if r.Crit != nil && (r.Op == "gt" && *r.Crit < r.Warn || r.Op == "lt" && *r.Crit > r.Warn) {
		return fmt.Errorf("crit threshold must be beyond warn")
	}
	return nil
}

func beyond(op string, v, t float64) bool {
	if op == "lt" {
		return v < t
	}
	return v > t
}

// Level is the severity a value reaches under r (0: clear).
func (r *Rule) Level(v float64) int {
	if r.Crit != nil && beyond(r.Op, v, *r.Crit) {
		return SevSevere
	}
	if beyond(r.Op, v, r.Warn) {
		return r.Severity
	}
	return 0
}

// Plausible reports whether v is a reading r can judge.
func (r *Rule) Plausible(v float64) bool { return v >= r.MinValue && v <= r.MaxValue }

// DefaultRules are version 1 of the rules a fresh install starts with.
func DefaultRules() []Rule {
	c := func(v float64) *float64 { return &v }
	return []Rule{
		{ID: "temp-high", Version: 1, Metric: "temp", Op: "gt", Warn: 80, Crit: c(120), Severity: SevMinor, Hold: 3, Recover: 2,
			NoDataSecs: 300, MinValue: -100, MaxValue: 1000, Note: "温度过高；超过 120 ℃ 为严重"},
		{ID: "pressure-low", Version: 1, Metric: "pressure", Op: "lt", Warn: 90, Crit: c(40), Severity: SevMinor, Hold: 3, Recover: 2,
			NoDataSecs: 300, MinValue: 0, MaxValue: 10000, Note: "管网压力过低；低于 40 kPa 为严重"},
		{ID: "battery-low", Version: 1, Metric: "battery", Op: "lt", Warn: 20, Severity: SevInfo, Hold: 2, Recover: 2,
			NoDataSecs: 0, MinValue: 0, MaxValue: 100, Note: "电量低"},
	}
}

// Track states (the rule's view of one device).
const (
	StNormal  = "normal"
	StPending = "pending"
	StFiring  = "firing"
	StAcked   = "acked"
	StNoData  = "nodata"
	// StRecovered is an instance's final state (a track returns to normal).
	StRecovered = "recovered"
)

// Track is the evaluation state of one (device, rule), moved by
// compare-and-set on Ver.
type Track struct {
	Device, Rule string
	RuleVersion  int
	State        string
	Breach       int
	Clear        int
	Boot, Seq    int64
	InstanceID   string
	LastValue    float64
	LastAt       *time.Time
	Ver          int64
	// Severity of the open instance (0 none), read with the track.
	Severity int
	// Acked: the open instance was acknowledged (it returns there from
	// 无数据).
	Acked bool
}

// Step is what one sample does to a track.
type Step int

// Steps.
const (
	StepLate       Step = iota // older than the track: kept as evidence only
	StepNone                   // no state change (normal stays normal)
	StepPending                // 正常 → 待确认 or still 待确认
	StepFlap                   // 待确认 → 正常, silently
	StepOpen                   // → 告警中: a new instance
	StepRepeat                 // open instance seen again (count, last, peak)
	StepEscalate               // open instance reached a higher severity
	StepClearing               // open instance, clear sample, not yet recovered
	StepRecover                // → 已恢复
	StepResumeData             // 无数据 → 告警中/已确认 on a new sample
)

// After reports whether (boot, seq) is after the track's position.
func (t *Track) After(boot, seq int64) bool {
	return boot > t.Boot || boot == t.Boot && seq > t.Seq
}

// Evaluate is the rule's state machine for one sample: the next track and
// the step taken. It is pure; the caller writes the result with a
// conditional update on t.Ver, so that a concurrent writer makes it read
// and evaluate again.
func Evaluate(t Track, r *Rule, s *Sample) (Track, Step, int) {
	if !t.After(s.Boot, s.Seq) {
		return t, StepLate, 0
	}
	n := t
	n.Boot, n.Seq, n.LastValue, n.RuleVersion = s.Boot, s.Seq, s.Value, r.Version
	lvl := r.Level(s.Value)
	open := t.State == StFiring || t.State == StAcked || t.State == StNoData
	switch {
	case !open && lvl == 0:
		n.Breach, n.Clear = 0, 0
		if t.State == StPending {
			n.State = StNormal
			return n, StepFlap, 0
		}
		n.State = StNormal
		return n, StepNone, 0
	case !open:
		n.Breach = t.Breach + 1
		if t.State != StPending {
			n.Breach = 1
		}
		if n.Breach >= r.Hold || lvl == SevSevere {
			n.State, n.Breach, n.Clear, n.Severity, n.Acked = StFiring, 0, 0, lvl, false
			return n, StepOpen, lvl
		}
		n.State = StPending
		return n, StepPending, lvl
	case lvl == 0:
		n.Clear = t.Clear + 1
		if t.State == StNoData {
			n.State = StFiring
			if t.Acked {
				n.State = StAcked
			}
		}
		if n.Clear >= r.Recover {
			n.State, n.Clear, n.Breach, n.InstanceID, n.Severity, n.Acked = StNormal, 0, 0, "", 0, false
			return n, StepRecover, 0
		}
		return n, StepClearing, 0
	default:
		n.Clear = 0
		step := StepRepeat
		if t.State == StNoData {
			n.State = StFiring
			if t.Acked {
				n.State = StAcked
			}
			step = StepResumeData
		}
		if lvl > t.Severity {
			n.Severity = lvl
			return n, StepEscalate, lvl
		}
		return n, step, lvl
	}
}
