package keeltype

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// BatchState is where a bulk task stands. Transitions (each one conditional
// UPDATE naming the expected states):
//
//	queued  → running            materialized and picked up by the leader
//	queued | running → paused    operator, or a key's auto-pause when the
//	                              batch pauses as a whole
//	paused  → queued             operator resume (then → running)
//	running → completed          every item ended, none failed
//	running → partial_completed  every item ended, some failed
//	queued | running | paused → terminated   operator
type BatchState string

const (
	BatchQueued           BatchState = "queued"
	BatchRunning          BatchState = "running"
	BatchPaused           BatchState = "paused"
	BatchCompleted        BatchState = "completed"
	BatchPartialCompleted BatchState = "partial_completed"
	BatchTerminated       BatchState = "terminated"
)

// Final reports whether no transition leaves s.
func (s BatchState) Final() bool {
	return s == BatchCompleted || s == BatchPartialCompleted || s == BatchTerminated
}

// BatchOutcome is an item's outcome bucket, derived from its job's state
// (and wait reason / result). Counters are kept per bucket.
type BatchOutcome string

const (
	// OutcomeQueued: scheduled, available or retryable (waiting for a claim).
	OutcomeQueued BatchOutcome = "queued"
	// OutcomeProcessing: running, or unknown (its Check decides next).
	OutcomeProcessing BatchOutcome = "processing"
	// OutcomeWaitingConnection: waiting, reason "connection" (nothing sent).
	OutcomeWaitingConnection BatchOutcome = "waiting_connection"
	// OutcomeWaitingExternalACK: waiting, reason "external_ack" (another
	// channel sent it; this batch did not).
	OutcomeWaitingExternalACK BatchOutcome = "waiting_external_ack"
	// OutcomeWaitingACK: waiting, reason "ack" (this batch sent it).
	OutcomeWaitingACK BatchOutcome = "waiting_ack"
	// OutcomeWaiting: waiting with any other reason.
	OutcomeWaiting BatchOutcome = "waiting"
	// OutcomeSuccess: completed.
	OutcomeSuccess BatchOutcome = "success"
	// OutcomeFailed: failed, manual (dead letter), or cancelled other than
	// by the batch's termination.
	OutcomeFailed BatchOutcome = "failed"
	// OutcomeSkipped: skipped with a reason code; the outside world was not
	// called.
	OutcomeSkipped BatchOutcome = "skipped"
	// OutcomeUnprocessed: cancelled with result {"reason":"batch_terminated"}:
	// the batch was terminated before the item began.
	OutcomeUnprocessed BatchOutcome = "unprocessed"
)

// AllBatchOutcomes lists every bucket.
var AllBatchOutcomes = []BatchOutcome{OutcomeQueued, OutcomeProcessing, OutcomeWaitingConnection,
	OutcomeWaitingExternalACK, OutcomeWaitingACK, OutcomeWaiting, OutcomeSuccess, OutcomeFailed,
	OutcomeSkipped, OutcomeUnprocessed}

// Live reports whether items in bucket o may still change outcome.
func (o BatchOutcome) Live() bool {
	switch o {
	case OutcomeQueued, OutcomeProcessing, OutcomeWaitingConnection, OutcomeWaitingExternalACK,
		OutcomeWaitingACK, OutcomeWaiting:
		return true
	}
	return false
}

// BatchRow is a bulk task as stored, with its counters.
type BatchRow struct {
	ID                int64
	Kind              string
	Name              string
	Reason            string
	Filter            json.RawMessage
	FilterHash        string
	SnapshotAt        time.Time
	CreatedBy         string
	Queue             string
	Rate              float64 // claims per second per flow key of the batch
	AutoPauseFailures int     // consecutive failures that pause a key
	PauseOnKeyPause   bool    // a key's auto-pause pauses the whole batch
	Preview           json.RawMessage
	State             BatchState
	Materialized      bool
	PauseReason       string // "" | "manual" | "auto"
	PauseContext      json.RawMessage
	LastError         string
	CreatedAt         time.Time
	StartedAt         *time.Time
	PausedAt          *time.Time
	CompletedAt       *time.Time
	UpdatedAt         time.Time
	// Counts per outcome bucket (every bucket present); Total is their sum.
	Counts map[BatchOutcome]int64
	Total  int64
}

// Batch sentinel errors. Each is wrapped with details; test with errors.Is.
var (
	// ErrBatchToken: a preview token is malformed or its signature does not
	// verify (tampered, or signed with another key).
	ErrBatchToken = errors.New("keel: invalid batch preview token")
	// ErrBatchTokenExpired: the token verified but is past its expiry.
	ErrBatchTokenExpired = errors.New("keel: batch preview token expired")
	// ErrBatchTokenOperator: the token was issued to another operator.
	ErrBatchTokenOperator = errors.New("keel: batch preview token belongs to another operator")
	// ErrBatchTerminated: materialization stopped because the batch was
	// terminated.
	ErrBatchTerminated = errors.New("keel: batch terminated")
)

// BatchStateError explains a refused batch transition.
type BatchStateError struct {
	BatchID int64
	Action  string
	State   BatchState
}

func (e *BatchStateError) Error() string {
	return fmt.Sprintf("keel: cannot %s batch %d in state %s", e.Action, e.BatchID, e.State)
}

// Unwrap lets errors.Is(err, ErrInvalidState) match.
func (e *BatchStateError) Unwrap() error { return ErrInvalidState }
