package api

import (
	"encoding/json"
	"time"

	"github.com/keelwork/keel/keeltype"
)

// Page is a list response: Data in order, NextCursor set when more follow.
type Page[T any] struct {
	Data       []T    `json:"data"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Job is a job as the API shows it.
type Job struct {
	ID              int64                   `json:"id"`
	Kind            string                  `json:"kind"`
	Queue           string                  `json:"queue"`
	State           keeltype.JobState       `json:"state"`
	Priority        int                     `json:"priority"`
	RunAt           time.Time               `json:"run_at"`
	Attempt         int                     `json:"attempt"`
	MaxAttempts     int                     `json:"max_attempts"`
	Fence           int64                   `json:"fence"`
	LeaseOwner      string                  `json:"lease_owner,omitempty"`
	LeaseExpiresAt  *time.Time              `json:"lease_expires_at,omitempty"`
	IdempotencyKey  string                  `json:"idempotency_key,omitempty"`
	FlowKey         string                  `json:"flow_key,omitempty"`
	BatchID         int64                   `json:"batch_id,omitempty"`
	Subject         string                  `json:"subject,omitempty"`
	WaitReason      string                  `json:"wait_reason,omitempty"`
	WaitDeadline    *time.Time              `json:"wait_deadline,omitempty"`
	NeedsCheck      bool                    `json:"needs_check"`
	CancelRequested bool                    `json:"cancel_requested"`
	Args            json.RawMessage         `json:"args,omitempty"`
	Metadata        json.RawMessage         `json:"metadata,omitempty"`
	Result          json.RawMessage         `json:"result,omitempty"`
	Errors          []keeltype.AttemptError `json:"errors"`
	CreatedAt       time.Time               `json:"created_at"`
	AttemptedAt     *time.Time              `json:"attempted_at,omitempty"`
	FinalizedAt     *time.Time              `json:"finalized_at,omitempty"`
}

// JobView converts a stored row.
func JobView(r *keeltype.JobRow) *Job {
	j := &Job{ID: r.ID, Kind: r.Kind, Queue: r.Queue, State: r.State, Priority: r.Priority, RunAt: r.RunAt,
		Attempt: r.Attempt, MaxAttempts: r.MaxAttempts, Fence: r.Fence, LeaseOwner: r.LeaseOwner,
		LeaseExpiresAt: r.LeaseExpiresAt, IdempotencyKey: r.IdempotencyKey, FlowKey: r.FlowKey, BatchID: r.BatchID,
		Subject: r.Subject, WaitReason: r.WaitReason, WaitDeadline: r.WaitDeadline, NeedsCheck: r.NeedsCheck,
		CancelRequested: r.CancelRequested, Args: rawOrNil(r.Args), Metadata: rawOrNil(r.Metadata),
		Result: rawOrNil(r.Result), Errors: r.Errors, CreatedAt: r.CreatedAt, AttemptedAt: r.AttemptedAt,
		FinalizedAt: r.FinalizedAt}
	if j.Errors == nil {
		j.Errors = []keeltype.AttemptError{}
	}
	return j
}

func rawOrNil(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return nil
	}
	return b
}

// Queue is a queue's control state and live depth.
type Queue struct {
	Name             string                      `json:"name"`
	Paused           bool                        `json:"paused"`
	PausedAt         *time.Time                  `json:"paused_at,omitempty"`
	PausedBy         string                      `json:"paused_by,omitempty"`
	Counts           map[keeltype.JobState]int64 `json:"counts"`
	OldestAgeSeconds float64                     `json:"oldest_available_age_seconds"`
}

// FlowKey is a key's persisted control state with its live counts.
type FlowKey struct {
	Key                 string                      `json:"key"`
	Paused              bool                        `json:"paused"`
	PausedAt            *time.Time                  `json:"paused_at,omitempty"`
	PausedBy            string                      `json:"paused_by,omitempty"`
	PauseReason         string                      `json:"pause_reason,omitempty"`
	Breaker             keeltype.BreakerState       `json:"breaker"`
	BreakerOpenedAt     *time.Time                  `json:"breaker_opened_at,omitempty"`
	ConsecutiveFailures int                         `json:"consecutive_failures"`
	Running             int                         `json:"running"`
	LastError           string                      `json:"last_error,omitempty"`
	LastFailureClass    string                      `json:"last_failure_class,omitempty"`
	LastFailureAt       *time.Time                  `json:"last_failure_at,omitempty"`
	LastSuccessAt       *time.Time                  `json:"last_success_at,omitempty"`
	UpdatedAt           time.Time                   `json:"updated_at"`
	Counts              map[keeltype.JobState]int64 `json:"counts,omitempty"`
	OldestAgeSeconds    float64                     `json:"oldest_available_age_seconds,omitempty"`
}

// FlowKeyView converts a key row (and its stats, when known).
func FlowKeyView(k *keeltype.FlowKeyRow, st *keeltype.FlowKeyStats) *FlowKey {
	v := &FlowKey{Key: k.Key, Paused: k.PausedAt != nil, PausedAt: k.PausedAt, PausedBy: k.PausedBy,
		PauseReason: k.PauseReason, Breaker: k.BreakerState, BreakerOpenedAt: k.BreakerOpenedAt,
		ConsecutiveFailures: k.ConsecutiveFailures, Running: k.Running, LastError: k.LastError,
		LastFailureClass: k.LastFailureClass, LastFailureAt: k.LastFailureAt, LastSuccessAt: k.LastSuccessAt,
		UpdatedAt: k.UpdatedAt}
	if v.Breaker == "" {
		v.Breaker = keeltype.BreakerClosed
	}
	if st != nil {
		v.Counts, v.OldestAgeSeconds = st.Counts, ageSeconds(st.OldestAvailable)
	}
	return v
}

func ageSeconds(t *time.Time) float64 {
	if t == nil {
		return 0
	}
	return max(0, time.Since(*t).Seconds())
}

// FlowLimit is a limit as the API reads and writes it. Durations are Go
// duration strings ("30s").
type FlowLimit struct {
	Pattern           string     `json:"pattern"`
	Queue             string     `json:"queue,omitempty"`
	Rate              float64    `json:"rate,omitempty"`
	Burst             int        `json:"burst,omitempty"`
	MaxRunning        int        `json:"max_running,omitempty"`
	BreakerFailures   int        `json:"breaker_failures,omitempty"`
	BreakerRatio      float64    `json:"breaker_ratio,omitempty"`
	BreakerWindow     string     `json:"breaker_window,omitempty"`
	BreakerMinCalls   int        `json:"breaker_min_calls,omitempty"`
	BreakerCooldown   string     `json:"breaker_cooldown,omitempty"`
	BreakerProbes     int        `json:"breaker_probes,omitempty"`
	AutoPauseFailures int        `json:"autopause_failures,omitempty"`
	Weight            int        `json:"weight,omitempty"`
	Ramp              []RampStep `json:"ramp,omitempty"`
	Reason            string     `json:"reason,omitempty"`
	UpdatedAt         *time.Time `json:"updated_at,omitempty"`
	UpdatedBy         string     `json:"updated_by,omitempty"`
}

// RampStep is one stage of a ramp: from After the rate is Rate.
type RampStep struct {
	After string  `json:"after"`
	Rate  float64 `json:"rate"`
}

// FlowLimitView converts an engine limit.
func FlowLimitView(l *keeltype.FlowLimit) *FlowLimit {
	v := &FlowLimit{Pattern: l.Pattern, Queue: l.Queue, Rate: l.Rate, Burst: l.Burst, MaxRunning: l.MaxRunning,
		BreakerFailures: l.BreakerFailures, BreakerRatio: l.BreakerRatio, BreakerWindow: dur(l.BreakerWindow),
		BreakerMinCalls: l.BreakerMinCalls, BreakerCooldown: dur(l.BreakerCooldown), BreakerProbes: l.BreakerProbes,
		AutoPauseFailures: l.AutoPauseFailures, Weight: l.Weight, UpdatedBy: l.UpdatedBy}
	if !l.UpdatedAt.IsZero() {
		t := l.UpdatedAt
		v.UpdatedAt = &t
	}
	for _, s := range l.Ramp {
		v.Ramp = append(v.Ramp, RampStep{After: s.After.String(), Rate: s.Rate})
	}
	return v
}

func dur(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

func parseDur(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > 30*24*time.Hour {
		return 0, Errorf(CodeInvalidArgument, "%s must be a duration like \"30s\" up to 720h", field)
	}
	return d, nil
}

// engineLimit converts a request body into an engine limit.
func (v *FlowLimit) engineLimit() (*keeltype.FlowLimit, error) {
	l := &keeltype.FlowLimit{Pattern: v.Pattern, Queue: v.Queue, Rate: v.Rate, Burst: v.Burst,
		MaxRunning: v.MaxRunning, BreakerFailures: v.BreakerFailures, BreakerRatio: v.BreakerRatio,
		BreakerMinCalls: v.BreakerMinCalls, BreakerProbes: v.BreakerProbes, AutoPauseFailures: v.AutoPauseFailures,
		Weight: v.Weight}
	var err error
	if l.BreakerWindow, err = parseDur("breaker_window", v.BreakerWindow); err != nil {
		return nil, err
	}
	if l.BreakerCooldown, err = parseDur("breaker_cooldown", v.BreakerCooldown); err != nil {
		return nil, err
	}
	if len(v.Ramp) > 100 {
		return nil, Errorf(CodeInvalidArgument, "ramp has at most 100 steps")
	}
	for i, s := range v.Ramp {
		d, err := parseDur("ramp["+itoa(i)+"].after", s.After)
		if err != nil {
			return nil, err
		}
		l.Ramp = append(l.Ramp, keeltype.RampStep{After: d, Rate: s.Rate})
	}
	return l, nil
}

// Audit is one audit log entry.
type Audit struct {
	ID      int64           `json:"id"`
	At      time.Time       `json:"at"`
	Actor   string          `json:"actor"`
	Action  string          `json:"action"`
	Target  string          `json:"target"`
	Reason  string          `json:"reason,omitempty"`
	Context json.RawMessage `json:"context,omitempty"`
}

// Me is the caller's identity.
type Me struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// CreatedToken is a new token with its secret, shown this once.
type CreatedToken struct {
	ID     int64  `json:"id"`
	Name   string `json:"name"`
	Role   string `json:"role"`
	Secret string `json:"secret"`
}
