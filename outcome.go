package keel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// A worker reports how an attempt ended through its returned error: nil is
// success; a plain error is retryable; the functions below wrap the other
// outcomes. They are errors so that they flow through ordinary Go code
// unchanged (return keel.JobWait(...) from deep inside a call chain).

type snoozeOutcome struct{ d time.Duration }

func (o *snoozeOutcome) Error() string { return fmt.Sprintf("snoozed for %s", o.d) }

// JobSnooze reschedules the job after d without consuming an attempt and
// without recording a failure.
func JobSnooze(d time.Duration) error {
	if d < 0 {
		d = 0
	}
	return &snoozeOutcome{d: d}
}

type waitOutcome struct {
	reason   string
	deadline time.Time
}

func (o *waitOutcome) Error() string {
	return fmt.Sprintf("waiting (%s) until %s", o.reason, o.deadline.Format(time.RFC3339))
}

// JobWait parks the job in the waiting state: not a failure, no attempt
// consumed. It becomes available again when woken (Client.JobWake, e.g. a
// customer connected) or when deadline passes; then the worker runs again and
// Job.WaitExpired tells which.
func JobWait(reason string, deadline time.Time) error {
	return &waitOutcome{reason: reason, deadline: deadline}
}

type unknownOutcome struct{ err error }

func (o *unknownOutcome) Error() string { return "result unknown: " + o.err.Error() }
func (o *unknownOutcome) Unwrap() error { return o.err }

// JobUnknown says the side effect may have happened (a timeout after the
// request was sent). The job enters the unknown state; before any new attempt
// the kind's Check queries the outside world and decides. A kind without a
// Check goes to manual instead: nothing may guess.
func JobUnknown(err error) error { return &unknownOutcome{err: nonNil(err)} }

type permanentOutcome struct{ err error }

func (o *permanentOutcome) Error() string { return "permanent: " + o.err.Error() }
func (o *permanentOutcome) Unwrap() error { return o.err }

// JobPermanent says retrying cannot help (bad input, rejected by the
// counterpart). The job goes to manual, the dead letter state, with its error
// history; an operator retries or discards it.
func JobPermanent(err error) error { return &permanentOutcome{err: nonNil(err)} }

type failOutcome struct{ err error }

func (o *failOutcome) Error() string { return "failed: " + o.err.Error() }
func (o *failOutcome) Unwrap() error { return o.err }

// JobFail ends the job in the final failed state: a decided business failure
// that needs no operator (e.g. a confirmation that never came).
func JobFail(err error) error { return &failOutcome{err: nonNil(err)} }

type cancelOutcome struct{ err error }

func (o *cancelOutcome) Error() string { return "cancelled: " + o.err.Error() }
func (o *cancelOutcome) Unwrap() error { return o.err }

// JobCancel ends the job as cancelled.
func JobCancel(err error) error { return &cancelOutcome{err: nonNil(err)} }

type skipOutcome struct{ reason string }

func (o *skipOutcome) Error() string { return "skipped: " + o.reason }

// JobSkip ends the job as skipped with a reason code: the outside world was
// not called.
func JobSkip(reason string) error { return &skipOutcome{reason: reason} }

func nonNil(err error) error {
	if err == nil {
		return errors.New("no error given")
	}
	return err
}

// CheckDecision is what a kind's Check concluded about a job whose previous
// attempt had an unknown result.
type CheckDecision int

const (
	// CheckRetry: the side effect did not happen; run Work now.
	CheckRetry CheckDecision = iota + 1
	// CheckCompleted: the side effect happened; complete without calling Work.
	CheckCompleted
	// CheckManual: cannot tell; hand it to an operator.
	CheckManual
)

// CheckResult is a Check's verdict. Result is stored when completed; Reason
// explains a manual verdict.
type CheckResult struct {
	Decision CheckDecision
	Result   any
	Reason   string
}

type resultKey struct{}

type resultHolder struct{ value json.RawMessage }

// RecordResult stores v (as JSON) as the job's result when the attempt
// succeeds. Call it from Work before returning nil.
func RecordResult(ctx context.Context, v any) error {
	h, ok := ctx.Value(resultKey{}).(*resultHolder)
	if !ok {
		return errors.New("keel: RecordResult called outside a job")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("keel: encoding result: %w", err)
	}
	h.value = b
	return nil
}
