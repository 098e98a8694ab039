package inventory

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// admission is the database's safety watermark for new reservations:
// recent reservation latency and pool wait (the time from asking for a
// transaction to holding one) are measured on every admitted request;
// while the average of the last window is over its budget, new
// reservations are refused with ErrBusy before anything is written, and
// low-value consumers pause. Confirmations and releases are never refused
// here: they are the share the watermark keeps.
type admission struct {
	latencyBudget, waitBudget time.Duration
	window                    time.Duration
	retryAfter                time.Duration
	now                       func() time.Time

	mu      sync.Mutex
	samples []sample // admitted requests of the last window, oldest first
	// The samples' sums, kept as they come and go: every admission reads
	// the average, and a flash sale's callers take this lock thousands of
	// times a second (summing 4,096 samples each time held it for
	// microseconds).
	sumLatency, sumWait time.Duration
	refused             int64
	forced              bool // an operator's switch: refuse as if over
}

type sample struct {
	at            time.Time
	latency, wait time.Duration
}

// AdmissionState is what the console and API show.
type AdmissionState struct {
	Over        bool          `json:"over"`
	Forced      bool          `json:"forced"`
	Latency     time.Duration `json:"latency_ns"`
	PoolWait    time.Duration `json:"pool_wait_ns"`
	LatencyMax  time.Duration `json:"latency_budget_ns"`
	PoolWaitMax time.Duration `json:"pool_wait_budget_ns"`
	Samples     int           `json:"samples"`
	Refused     int64         `json:"refused"`
	RetryAfter  time.Duration `json:"retry_after_ns"`
}

func newAdmission(s *Settings, now func() time.Time) *admission {
	return &admission{latencyBudget: s.LatencyBudget, waitBudget: s.PoolWaitBudget, window: 2 * time.Second,
		retryAfter: s.RetryAfter, now: now}
}

func (a *admission) state() AdmissionState {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stateLocked()
}

func (a *admission) stateLocked() AdmissionState {
	cut := a.now().Add(-a.window)
	i := 0
	for i < len(a.samples) && a.samples[i].at.Before(cut) {
		i++
	}
	a.drop(i)
	s := AdmissionState{Forced: a.forced, LatencyMax: a.latencyBudget, PoolWaitMax: a.waitBudget,
		Samples: len(a.samples), Refused: a.refused, RetryAfter: a.retryAfter}
	if n := len(a.samples); n > 0 {
		s.Latency, s.PoolWait = a.sumLatency/time.Duration(n), a.sumWait/time.Duration(n)
	}
	s.Over = a.forced || s.Latency > a.latencyBudget || s.PoolWait > a.waitBudget
	return s
}

// over reports whether the watermark is passed (consumers ask it).
func (a *admission) over() bool { return a.state().Over }

// admit refuses a new reservation over the watermark.
func (a *admission) admit() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.stateLocked(); s.Over {
		a.refused++
		return &busyError{retryAfter: a.retryAfter, state: s}
	}
	return nil
}

// measure is one admitted request's timing; act fills in the pool wait.
// A coalesced request's wait is filled in by its batch's leader, which can
// still be at it when the request has stopped waiting (its context ended):
// mu orders the two.
type measure struct {
	mu        sync.Mutex
	start     time.Time
	slotAsked time.Time
	wait      time.Duration
	seen      bool
}

type measureKey struct{}

// begin starts measuring an admitted request: the returned context carries
// the measure act fills in, the func ends it.
func (a *admission) begin(ctx context.Context) (context.Context, func()) {
	m := &measure{start: a.now()}
	return context.WithValue(ctx, measureKey{}, m), func() {
		m.mu.Lock()
		wait := m.wait
		m.mu.Unlock()
		a.record(a.now().Sub(m.start), wait)
	}
}

// waited records, once per request, how long it waited for a transaction:
// from asking for a reservation slot (see reserveSlot), if it had to, or
// else from asking the pool.
func waited(ctx context.Context, asked time.Time, now time.Time) {
	if m, ok := ctx.Value(measureKey{}).(*measure); ok {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.seen {
			return
		}
		if !m.slotAsked.IsZero() && m.slotAsked.Before(asked) {
			asked = m.slotAsked
		}
		m.wait, m.seen = now.Sub(asked), true
	}
}

// slotAsked notes when a request began waiting for a reservation slot.
func slotAsked(ctx context.Context, at time.Time) {
	if m, ok := ctx.Value(measureKey{}).(*measure); ok {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.slotAsked.IsZero() {
			m.slotAsked = at
		}
	}
}

// refuse counts a reservation refused for want of a slot (see
// reserveSlot): the same 429 as over the watermark, nothing written.
func (a *admission) refuse() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refused++
	return &busyError{retryAfter: a.retryAfter, state: a.stateLocked()}
}

func (a *admission) record(latency, wait time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.samples = append(a.samples, sample{at: a.now(), latency: latency, wait: wait})
	a.sumLatency += latency
	a.sumWait += wait
	if len(a.samples) > 4096 {
		a.drop(len(a.samples) - 4096)
	}
}

// drop forgets the n oldest samples.
func (a *admission) drop(n int) {
	if n == 0 {
		return
	}
	for _, x := range a.samples[:n] {
		a.sumLatency -= x.latency
		a.sumWait -= x.wait
	}
	if n == len(a.samples) {
		a.samples = a.samples[:0] // reuse the array
		return
	}
	a.samples = a.samples[n:]
}

func (a *admission) force(on bool) {
	a.mu.Lock()
	a.forced = on
	a.mu.Unlock()
}

// busyError is ErrBusy with the wait to advertise.
type busyError struct {
	retryAfter time.Duration
	state      AdmissionState
}

func (e *busyError) Error() string {
	return fmt.Sprintf("inventory busy (reservation latency %s, pool wait %s): retry after %s",
		e.state.Latency, e.state.PoolWait, e.retryAfter)
}
func (e *busyError) Unwrap() error { return ErrBusy }
