package keel

import (
	"testing"
	"time"

	"github.com/keelwork/keel/keeltype"
)

func TestRampStepsUpAfterResume(t *testing.T) {
	l := &keeltype.FlowLimit{Pattern: "carrier:*", Rate: 200, Ramp: []keeltype.RampStep{
		{After: 0, Rate: 50}, {After: 5 * time.Minute, Rate: 100}, {After: 10 * time.Minute, Rate: 200}}}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k := &keeltype.FlowKeyRow{Key: "carrier:dhl", RampStartedAt: &start}
	for _, tc := range []struct {
		at   time.Duration
		want float64
	}{{0, 50}, {4 * time.Minute, 50}, {5 * time.Minute, 100}, {9 * time.Minute, 100}, {10 * time.Minute, 200}, {time.Hour, 200}} {
		if got := effectiveRate(l, k, start.Add(tc.at)); got != tc.want {
			t.Errorf("at +%s: rate %v, want %v", tc.at, got, tc.want)
		}
	}
	k.RampStartedAt = nil
	if got := effectiveRate(l, k, start); got != 200 {
		t.Errorf("without a ramp start the configured rate applies, got %v", got)
	}
}

func TestResumeAndBreakerCloseStartTheRamp(t *testing.T) {
	l := &keeltype.FlowLimit{Pattern: "k", BreakerFailures: 1, BreakerCooldown: time.Second, BreakerProbes: 1}
	now := time.Now()
	k := &keeltype.FlowKeyRow{Key: "k", BreakerState: keeltype.BreakerClosed}
	record(l, k, outcome{class: keeltype.ErrorClassRetryable, message: "down"}, now)
	if k.BreakerState != keeltype.BreakerOpen {
		t.Fatalf("one failure with threshold 1 must open, got %s", k.BreakerState)
	}
	if n := breakerAllowance(l, k, now.Add(500*time.Millisecond)); n != 0 {
		t.Fatalf("open breaker allowed %d during cool-down", n)
	}
	if n := breakerAllowance(l, k, now.Add(time.Second)); n != 1 || k.BreakerState != keeltype.BreakerHalfOpen {
		t.Fatalf("after cool-down: allowance %d state %s, want 1 half_open", n, k.BreakerState)
	}
	take(l, k, 1)
	record(l, k, outcome{success: true}, now.Add(2*time.Second))
	if k.BreakerState != keeltype.BreakerClosed || k.RampStartedAt == nil || k.ConsecutiveFailures != 0 {
		t.Fatalf("probe success must close, reset and start the ramp: %+v", k)
	}
}

func TestTokenBucketSpacingWithoutBurst(t *testing.T) {
	l := &keeltype.FlowLimit{Pattern: "k", Rate: 10}
	k := &keeltype.FlowKeyRow{Key: "k"}
	t0 := time.Now()
	if n, _ := allowance(l, k, t0); n != 1 {
		t.Fatalf("a fresh key with burst 0 holds exactly one token, got %d", n)
	}
	take(l, k, 1)
	n, wait := allowance(l, k, t0.Add(50*time.Millisecond))
	if n != 0 || wait < 49*time.Millisecond || wait > 51*time.Millisecond {
		t.Fatalf("half a period later: %d tokens, next in %s (want 0, ~50ms)", n, wait)
	}
	// Idle for a minute: still one token, never a burst.
	if n, _ := allowance(l, k, t0.Add(time.Minute)); n != 1 {
		t.Fatalf("idle key accumulated %d tokens with burst 0", n)
	}
	l.Burst = 4
	if n, _ := allowance(l, k, t0.Add(2*time.Minute)); n != 5 {
		t.Fatalf("burst 4 allows 5 at once after idle, got %d", n)
	}
}

func TestConcurrencyLimitCountsRunningOnly(t *testing.T) {
	l := &keeltype.FlowLimit{Pattern: "k", MaxRunning: 3}
	k := &keeltype.FlowKeyRow{Key: "k", Running: 2}
	if n, _ := allowance(l, k, time.Now()); n != 1 {
		t.Fatalf("2 of 3 running: allowance %d, want 1", n)
	}
	k.PausedAt = ptr(time.Now())
	if n, _ := allowance(l, k, time.Now()); n != 0 {
		t.Fatalf("a paused key gets nothing, got %d", n)
	}
}

func TestShareOutNeverExceedsBudget(t *testing.T) {
	weights := map[string]int{"a": 100, "b": 1, "c": 1, "d": 1}
	shares := shareOut([]string{"a", "b", "c", "d"}, 10, func(k string) int { return weights[k] })
	total := 0
	for _, k := range []string{"b", "c", "d"} {
		if shares[k] < 1 {
			t.Fatalf("key %s got no share: %v", k, shares)
		}
	}
	for _, n := range shares {
		total += n
	}
	if total != 10 || shares["a"] < 5 {
		t.Fatalf("shares %v: total %d, want 10 with the heavy key favoured", shares, total)
	}
}

func TestLimitMatchMostSpecific(t *testing.T) {
	set := newLimitSet([]*keeltype.FlowLimit{
		{Pattern: "*", Rate: 1}, {Pattern: "app:*", Rate: 2}, {Pattern: "app:4*", Rate: 3},
		{Pattern: "app:42", Rate: 4}, {Pattern: "app:*", Queue: "sms", Rate: 5},
	})
	for _, tc := range []struct {
		key, queue string
		want       float64
	}{{"app:42", "x", 4}, {"app:43", "x", 3}, {"app:7", "x", 2}, {"app:7", "sms", 5}, {"tenant:1", "x", 1}} {
		if got := set.match(tc.key, tc.queue); got == nil || got.Rate != tc.want {
			t.Errorf("match(%q, %q) = %+v, want rate %v", tc.key, tc.queue, got, tc.want)
		}
	}
	if set.match("", "x") != nil {
		t.Error("jobs without a flow key match no limit")
	}
}
