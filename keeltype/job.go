// Package keeltype holds the leaf types and sentinel errors shared by the
// engine, its drivers and modules. It imports nothing of Keel's so that any
// package can depend on it without cycles.
package keeltype

import (
	"encoding/json"
	"time"
)

// JobState is where a job stands in its state machine. Every transition is a
// single conditional UPDATE whose WHERE names the expected state (and, once a
// job has been claimed, its fence).
type JobState string

const (
	// JobStateScheduled: run_at is in the future; promoted to available when due.
	JobStateScheduled JobState = "scheduled"
	// JobStateAvailable: ready to be claimed.
	JobStateAvailable JobState = "available"
	// JobStateRunning: claimed; owned by lease_owner with the current fence
	// until lease_expires_at.
	JobStateRunning JobState = "running"
	// JobStateRetryable: failed with a retryable error; promoted when its
	// backoff (run_at) passes.
	JobStateRetryable JobState = "retryable"
	// JobStateWaiting: not a failure. Parked with a reason and a deadline until
	// an event wakes it or the deadline passes.
	JobStateWaiting JobState = "waiting"
	// JobStateUnknown: the side effect may have happened. When due, the kind's
	// Check runs before any new attempt.
	JobStateUnknown JobState = "unknown"
	// JobStateManual: dead letter. A permanent error or an exhausted attempt
	// budget; kept with its error history until an operator acts.
	JobStateManual JobState = "manual"
	// JobStateCompleted is final: the work succeeded (or was confirmed).
	JobStateCompleted JobState = "completed"
	// JobStateFailed is final: a decided failure (e.g. a waiting deadline that a
	// worker or check resolved as failed).
	JobStateFailed JobState = "failed"
	// JobStateCancelled is final: an operator or a batch terminated it.
	JobStateCancelled JobState = "cancelled"
	// JobStateSkipped is final: decided not to call the outside world; the
	// reason code is in Result.
	JobStateSkipped JobState = "skipped"
)

// AllJobStates lists every state in lifecycle order (for metrics and UIs).
var AllJobStates = []JobState{
	JobStateScheduled, JobStateAvailable, JobStateRunning, JobStateRetryable,
	JobStateWaiting, JobStateUnknown, JobStateManual, JobStateCompleted,
	JobStateFailed, JobStateCancelled, JobStateSkipped,
}

// Final reports whether no further transition happens without an operator.
func (s JobState) Final() bool {
	switch s {
	case JobStateCompleted, JobStateFailed, JobStateCancelled, JobStateSkipped:
		return true
	}
	return false
}

// Valid reports whether s is one of the known states.
func (s JobState) Valid() bool {
	for _, k := range AllJobStates {
		if k == s {
			return true
		}
	}
	return false
}

// ErrorClass classifies a failure. Only real failures (retryable, permanent,
// timeout, unknown) count toward breakers and auto-pause; waits and snoozes
// are not failures at all and never produce an AttemptError.
type ErrorClass string

const (
	ErrorClassRetryable    ErrorClass = "retryable"
	ErrorClassPermanent    ErrorClass = "permanent"
	ErrorClassUnknown      ErrorClass = "unknown"
	ErrorClassTimeout      ErrorClass = "timeout"
	ErrorClassPanic        ErrorClass = "panic"
	ErrorClassLeaseExpired ErrorClass = "lease_expired"
	ErrorClassCancelled    ErrorClass = "cancelled"
)

// AttemptError is one entry of a job's error history.
type AttemptError struct {
	Attempt int        `json:"attempt"`
	Fence   int64      `json:"fence"`
	Class   ErrorClass `json:"class"`
	Message string     `json:"message"`
	At      time.Time  `json:"at"`
}

// JobRow is a job as stored. Args, Metadata and Result are raw JSON.
type JobRow struct {
	ID              int64
	Kind            string
	Queue           string
	Args            json.RawMessage
	Metadata        json.RawMessage
	State           JobState
	Priority        int
	RunAt           time.Time
	Attempt         int
	MaxAttempts     int
	Fence           int64
	LeaseOwner      string
	LeaseExpiresAt  *time.Time
	IdempotencyKey  string
	FlowKey         string
	BatchID         int64 // 0 when the job belongs to no batch
	Subject         string
	WaitReason      string
	WaitDeadline    *time.Time
	NeedsCheck      bool
	CancelRequested bool
	Result          json.RawMessage
	Errors          []AttemptError
	CreatedAt       time.Time
	AttemptedAt     *time.Time
	FinalizedAt     *time.Time
}
