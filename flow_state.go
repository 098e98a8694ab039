package keel

import (
	"encoding/json"
	"math"
	"time"

	"github.com/keelwork/keel/keeltype"
)

// The flow state machine, as pure functions over a locked key row: the
// callers hold the row's lock, so these read-modify-write steps are atomic.

// effectiveRate is the key's rate now, following its ramp after a breaker
// closed or the key resumed.
func effectiveRate(l *keeltype.FlowLimit, k *keeltype.FlowKeyRow, now time.Time) float64 {
	if len(l.Ramp) == 0 || k.RampStartedAt == nil {
		return l.Rate
	}
	elapsed := now.Sub(*k.RampStartedAt)
	rate := l.Rate
	for _, step := range l.Ramp {
		if elapsed < step.After {
			return rate
		}
		rate = step.Rate
	}
	return l.Rate // ramp finished: the configured rate
}

// bucketCapacity is 1 + burst: with burst 0 claims are spaced by 1/rate, so
// any 1 s window holds at most rate claims.
func bucketCapacity(l *keeltype.FlowLimit) float64 { return 1 + float64(l.Burst) }

// refill tops up the key's tokens for the time since it last took some.
func refill(l *keeltype.FlowLimit, k *keeltype.FlowKeyRow, now time.Time) {
	capacity := bucketCapacity(l)
	if k.TokensAt == nil {
		k.Tokens = capacity
	} else if dt := now.Sub(*k.TokensAt).Seconds(); dt > 0 {
		k.Tokens = math.Min(capacity, k.Tokens+dt*effectiveRate(l, k, now))
	}
	k.TokensAt = ptr(now)
}

// allowance is how many jobs of the key may be claimed now, and, when the
// rate is what holds it back, how long until the next token.
func allowance(l *keeltype.FlowLimit, k *keeltype.FlowKeyRow, now time.Time) (int, time.Duration) {
	if k.PausedAt != nil {
		return 0, 0
	}
	n := math.MaxInt32
	if l.Tracked() {
		n = breakerAllowance(l, k, now)
	}
	if l.MaxRunning > 0 {
		n = min(n, max(0, l.MaxRunning-k.Running))
	}
	var wait time.Duration
	if rate := effectiveRate(l, k, now); l.Rate > 0 && rate > 0 {
		refill(l, k, now)
		tokens := int(math.Floor(k.Tokens + 1e-9))
		if tokens < n {
			n = tokens
			wait = time.Duration((1 - (k.Tokens - float64(tokens))) / rate * float64(time.Second))
		}
	}
	return n, wait
}

// breakerAllowance moves an open breaker whose cool-down passed to half-open
// and returns how many jobs the breaker lets through.
func breakerAllowance(l *keeltype.FlowLimit, k *keeltype.FlowKeyRow, now time.Time) int {
	switch k.BreakerState {
	case keeltype.BreakerOpen:
		if k.BreakerOpenedAt != nil && now.Sub(*k.BreakerOpenedAt) < l.BreakerCooldown {
			return 0
		}
		k.BreakerState = keeltype.BreakerHalfOpen
		k.BreakerProbesLeft = max(1, l.BreakerProbes)
		return k.BreakerProbesLeft
	case keeltype.BreakerHalfOpen:
		return k.BreakerProbesLeft
	}
	return math.MaxInt32
}

// take records n claimed jobs against the key's tokens and probes.
func take(l *keeltype.FlowLimit, k *keeltype.FlowKeyRow, n int) {
	if l.Rate > 0 {
		k.Tokens -= float64(n)
	}
	if k.BreakerState == keeltype.BreakerHalfOpen {
		k.BreakerProbesLeft = max(0, k.BreakerProbesLeft-n)
	}
}

// outcome is one real result of a tracked key's job.
type outcome struct {
	success bool
	class   keeltype.ErrorClass
	message string
	jobID   int64
}

// autoPause describes a key paused by its consecutive failures, for the
// audit entry written in the same transaction.
type autoPause struct {
	key     string
	context map[string]any
}

// record applies one outcome to the key's counters, breaker and auto-pause.
// Only real successes reset the consecutive count; callers never pass
// waits, snoozes, skips or cancellations.
func record(l *keeltype.FlowLimit, k *keeltype.FlowKeyRow, o outcome, now time.Time) *autoPause {
	rollWindow(l, k, now)
	k.WindowCalls++
	// A key already paused keeps the count its pause reported: the outcomes
	// still arriving are of work started before the pause, and resuming
	// resets the count anyway.
	frozen := k.PausedAt != nil && l.AutoPauseFailures > 0
	if o.success {
		if !frozen {
			k.ConsecutiveFailures = 0
		}
		k.LastSuccessAt = ptr(now)
		if k.BreakerState == keeltype.BreakerHalfOpen {
			k.BreakerState, k.BreakerProbesLeft, k.RampStartedAt = keeltype.BreakerClosed, 0, ptr(now)
		}
		return nil
	}
	k.WindowFailures++
	if !frozen {
		k.ConsecutiveFailures++
	}
	k.LastError, k.LastFailureClass, k.LastFailureAt = o.message, string(o.class), ptr(now)
	// Half-open lets K probes decide: the first success closes; the breaker
	// reopens once every probe was let through and none has succeeded.
	reopen := k.BreakerState == keeltype.BreakerHalfOpen && k.BreakerProbesLeft == 0
	if reopen || shouldOpen(l, k) {
		k.BreakerState, k.BreakerOpenedAt, k.BreakerProbesLeft = keeltype.BreakerOpen, ptr(now), 0
	}
	if l.AutoPauseFailures > 0 && k.ConsecutiveFailures >= l.AutoPauseFailures && k.PausedAt == nil {
		return pauseAutomatically(l, k, o, now)
	}
	return nil
}

func rollWindow(l *keeltype.FlowLimit, k *keeltype.FlowKeyRow, now time.Time) {
	if l.BreakerWindow <= 0 {
		return
	}
	if k.WindowStart == nil || now.Sub(*k.WindowStart) >= l.BreakerWindow {
		k.WindowStart, k.WindowCalls, k.WindowFailures = ptr(now), 0, 0
	}
}

func shouldOpen(l *keeltype.FlowLimit, k *keeltype.FlowKeyRow) bool {
	if k.BreakerState != keeltype.BreakerClosed {
		return false
	}
	if l.BreakerFailures > 0 && k.ConsecutiveFailures >= l.BreakerFailures {
		return true
	}
	return l.BreakerRatio > 0 && k.WindowCalls >= max(1, l.BreakerMinCalls) &&
		float64(k.WindowFailures)/float64(k.WindowCalls) >= l.BreakerRatio
}

func pauseAutomatically(l *keeltype.FlowLimit, k *keeltype.FlowKeyRow, o outcome, now time.Time) *autoPause {
	ctx := map[string]any{
		"key": k.Key, "failure_class": o.class, "consecutive_failures": k.ConsecutiveFailures,
		"threshold": l.AutoPauseFailures, "last_error": o.message, "job_id": o.jobID, "at": now,
	}
	raw, _ := json.Marshal(ctx)
	k.PausedAt, k.PausedBy, k.PauseReason, k.PauseContext = ptr(now), "system:autopause", "auto", raw
	return &autoPause{key: k.Key, context: ctx}
}

// failureOutcome says whether a finish is a real failure or success of the
// key's counterpart, and how to describe it. ok=false means "not an outcome":
// waits, snoozes, skips, cancellations and hand-backs change no counter.
func failureOutcome(state keeltype.JobState, e *keeltype.AttemptError, jobID int64) (outcome, bool) {
	if state == keeltype.JobStateCompleted {
		return outcome{success: true, jobID: jobID}, true
	}
	if e == nil {
		return outcome{}, false
	}
	switch e.Class {
	case keeltype.ErrorClassRetryable, keeltype.ErrorClassPermanent, keeltype.ErrorClassTimeout,
		keeltype.ErrorClassPanic, keeltype.ErrorClassUnknown:
		return outcome{class: e.Class, message: e.Message, jobID: jobID}, true
	}
	return outcome{}, false
}
