package keeltype

import (
	"errors"
	"fmt"
)

var (
	// ErrNotFound: the row does not exist (or was pruned).
	ErrNotFound = errors.New("keel: not found")
	// ErrStaleFence: a state change carried a fence that is no longer the
	// job's current one (or the job is no longer running). Nothing changed.
	ErrStaleFence = errors.New("keel: stale fence")
	// ErrInvalidState: the requested transition is not allowed from the
	// job's current state. Nothing changed.
	ErrInvalidState = errors.New("keel: transition not allowed from current state")
	// ErrInvalidArgument: input failed validation. Nothing changed.
	ErrInvalidArgument = errors.New("keel: invalid argument")
)

// StaleFenceError explains why a fenced commit was rejected: the job's
// current state and fence at the time of the attempt.
type StaleFenceError struct {
	JobID        int64
	Fence        int64
	CurrentFence int64
	CurrentState JobState
}

func (e *StaleFenceError) Error() string {
	return fmt.Sprintf("keel: stale fence for job %d: committed with fence %d, job is %s with fence %d",
		e.JobID, e.Fence, e.CurrentState, e.CurrentFence)
}

// Unwrap lets errors.Is(err, ErrStaleFence) match.
func (e *StaleFenceError) Unwrap() error { return ErrStaleFence }

// InvalidStateError explains a refused transition.
type InvalidStateError struct {
	JobID  int64
	Action string
	State  JobState
}

func (e *InvalidStateError) Error() string {
	return fmt.Sprintf("keel: cannot %s job %d in state %s", e.Action, e.JobID, e.State)
}

// Unwrap lets errors.Is(err, ErrInvalidState) match.
func (e *InvalidStateError) Unwrap() error { return ErrInvalidState }
