package keeltype

import (
	"encoding/json"
	"time"
)

// BreakerState is a flow key's circuit breaker position.
type BreakerState string

const (
	// BreakerClosed: normal operation.
	BreakerClosed BreakerState = "closed"
	// BreakerOpen: claims of the key stop until the cool-down passes; its jobs
	// stay available, they are not failed.
	BreakerOpen BreakerState = "open"
	// BreakerHalfOpen: a limited number of probe jobs may run; a success
	// closes the breaker, a failure opens it again.
	BreakerHalfOpen BreakerState = "half_open"
)

// RampStep is one stage of a staged ramp-up: from After (since the ramp
// started) the key's rate is Rate.
type RampStep struct {
	After time.Duration `json:"after"`
	Rate  float64       `json:"rate"`
}

// FlowLimit configures flow control for the keys that match Pattern: an exact
// key ("app:42"), a prefix ending in '*' ("app:*") or "*" for every key.
// Zero fields mean "no such limit".
type FlowLimit struct {
	Pattern string
	// Queue restricts the limit to claims from one queue; "" = any queue.
	Queue string
	// Rate is the sustained claims per second of each matching key (token
	// bucket). 0 = unlimited.
	Rate float64
	// Burst is how many claims above the steady spacing a key may take at
	// once after being idle. 0 = strictly spaced: in any 1 s window a key
	// gets at most Rate claims.
	Burst int
	// MaxRunning caps a key's jobs running at once across all instances.
	// Waiting jobs do not count. 0 = unlimited.
	MaxRunning int
	// BreakerFailures opens the breaker after this many consecutive real
	// failures. 0 = disabled (unless BreakerRatio is set).
	BreakerFailures int
	// BreakerRatio opens the breaker when failures/calls ≥ ratio within
	// BreakerWindow once at least BreakerMinCalls calls were seen.
	BreakerRatio    float64
	BreakerWindow   time.Duration
	BreakerMinCalls int
	// BreakerCooldown is how long the breaker stays open before probing.
	BreakerCooldown time.Duration
	// BreakerProbes is how many probe jobs half-open lets through (default 1).
	BreakerProbes int
	// AutoPauseFailures pauses the key after this many consecutive real
	// failures until an operator resumes it. 0 = disabled.
	AutoPauseFailures int
	// Weight is the key's share when several keys have backlog (default 1).
	Weight int
	// Ramp steps the rate up after a breaker closes or the key resumes.
	Ramp      []RampStep
	UpdatedAt time.Time
	UpdatedBy string
}

// Tracked reports whether outcomes of matching keys must be counted
// (breaker or auto-pause configured).
func (l *FlowLimit) Tracked() bool {
	return l != nil && (l.BreakerFailures > 0 || l.BreakerRatio > 0 || l.AutoPauseFailures > 0)
}

// Gated reports whether claims of matching keys must take the key's lock
// (rate, concurrency or breaker state to honour).
func (l *FlowLimit) Gated() bool {
	return l != nil && (l.Rate > 0 || l.MaxRunning > 0 || l.Tracked())
}

// FlowKeyRow is a flow key's persisted control state. Rows exist for keys
// that were limited, tracked or paused at some point.
type FlowKeyRow struct {
	Key                 string
	Tokens              float64
	TokensAt            *time.Time
	PausedAt            *time.Time
	PausedBy            string
	PauseReason         string
	PauseContext        json.RawMessage
	BreakerState        BreakerState
	BreakerOpenedAt     *time.Time
	BreakerProbesLeft   int
	ConsecutiveFailures int
	WindowStart         *time.Time
	WindowCalls         int
	WindowFailures      int
	RampStartedAt       *time.Time
	LastError           string
	LastFailureClass    string
	LastFailureAt       *time.Time
	LastSuccessAt       *time.Time
	UpdatedAt           time.Time
	// Running is computed when locked/listed: the key's jobs in state
	// running right now (never stored).
	Running int
}

// FlowKeyStats is a flow key's live picture for APIs and metrics.
type FlowKeyStats struct {
	Key             string
	Counts          map[JobState]int64
	OldestAvailable *time.Time
	State           *FlowKeyRow // nil when the key has no persisted state
}
