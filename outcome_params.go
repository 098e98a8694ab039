package keel

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

var jsonMarshal = json.Marshal

// failParams maps a non-nil outcome error to the job's next state.
func (c *Client[TTx]) failParams(row *keeltype.JobRow, err error, _ *time.Time) *keeldriver.JobFinishParams {
	p := &keeldriver.JobFinishParams{ID: row.ID, Fence: row.Fence}
	if batchOutcomeParams(p, row, err) {
		return p
	}
	now := time.Now().UTC()
	var (
		snooze *snoozeOutcome
		wait   *waitOutcome
		unk    *unknownOutcome
		perm   *permanentOutcome
		fail   *failOutcome
		canc   *cancelOutcome
		skip   *skipOutcome
	)
	switch {
	case errors.As(err, &snooze):
		p.State, p.AttemptDelta = keeltype.JobStateScheduled, -1
		p.RunAt = ptr(now.Add(snooze.d))
	case errors.As(err, &wait):
		p.State, p.AttemptDelta = keeltype.JobStateWaiting, -1
		p.WaitReason, p.WaitDeadline = wait.reason, ptr(wait.deadline.UTC())
	case errors.As(err, &skip):
		p.State, p.Result = keeltype.JobStateSkipped, mustJSON(map[string]string{"skip_reason": skip.reason})
	case errors.As(err, &canc):
		p.State, p.Error = keeltype.JobStateCancelled, attemptError(row, keeltype.ErrorClassCancelled, err, now)
	case errors.As(err, &fail):
		p.State, p.Error = keeltype.JobStateFailed, attemptError(row, keeltype.ErrorClassPermanent, err, now)
	case errors.As(err, &perm):
		p.State, p.Error = keeltype.JobStateManual, attemptError(row, keeltype.ErrorClassPermanent, err, now)
	case errors.As(err, &unk):
		c.unknownParams(p, row, err, now)
	default:
		c.retryParams(p, row, classify(err), err, now)
	}
	return p
}

// unknownParams: query before retrying. Without a Check nothing can query,
// so the job goes to an operator rather than risk a duplicate side effect.
func (c *Client[TTx]) unknownParams(p *keeldriver.JobFinishParams, row *keeltype.JobRow, err error, now time.Time) {
	p.Error = attemptError(row, keeltype.ErrorClassUnknown, err, now)
	if !c.kindHasChecker(row) {
		p.State = keeltype.JobStateManual
		return
	}
	p.State, p.NeedsCheck = keeltype.JobStateUnknown, true
	p.RunAt = ptr(now.Add(c.config.RetryPolicy.NextRetry(row.Attempt)))
}

func (c *Client[TTx]) retryParams(p *keeldriver.JobFinishParams, row *keeltype.JobRow, class keeltype.ErrorClass, err error, now time.Time) {
	p.Error = attemptError(row, class, err, now)
	if row.Attempt >= row.MaxAttempts {
		p.State = keeltype.JobStateManual
		return
	}
	p.State = keeltype.JobStateRetryable
	p.RunAt = ptr(now.Add(c.config.RetryPolicy.NextRetry(row.Attempt)))
}

func (c *Client[TTx]) kindHasChecker(row *keeltype.JobRow) bool {
	f, ok := c.config.Workers.byKind[row.Kind]
	return ok && f.newUnit(row).hasChecker()
}

func classify(err error) keeltype.ErrorClass {
	var pe *panicError
	switch {
	case errors.As(err, &pe):
		return keeltype.ErrorClassPanic
	case errors.Is(err, context.DeadlineExceeded):
		return keeltype.ErrorClassTimeout
	}
	return keeltype.ErrorClassRetryable
}

const maxErrorMessage = 4000

func attemptError(row *keeltype.JobRow, class keeltype.ErrorClass, err error, now time.Time) *keeltype.AttemptError {
	msg := err.Error()
	if len(msg) > maxErrorMessage {
		msg = msg[:maxErrorMessage] + "…"
	}
	return &keeltype.AttemptError{Attempt: row.Attempt, Fence: row.Fence, Class: class, Message: msg, At: now}
}

func ptr[T any](v T) *T { return &v }
