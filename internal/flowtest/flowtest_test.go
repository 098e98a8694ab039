package flowtest

import (
	"testing"
	"time"
)

// claimsEvery returns n claim times, gap apart, from t0.
func claimsEvery(t0 time.Time, n int, gap time.Duration) []time.Time {
	times := make([]time.Time, n)
	for i := range times {
		times[i] = t0.Add(time.Duration(i) * gap)
	}
	return times
}

func TestPacedRate(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	stall := 200 * time.Millisecond

	// On time, with one stall of a whole second in the middle: the pace is
	// 10/s and the stall is counted, where the plain average falls under 9.5.
	onTime := claimsEvery(t0, 50, 100*time.Millisecond)
	after := claimsEvery(onTime[len(onTime)-1].Add(time.Second), 50, 100*time.Millisecond)
	stalled := append(onTime, after...)
	if rate, stalls := PacedRate(stalled, stall); rate < 9.99 || rate > 10.01 || stalls != 1 {
		t.Errorf("on time with one stall: %.2f/s, %d stalls; want 10/s, 1", rate, stalls)
	}
	if avg := AverageRate(stalled); avg >= 9.5 {
		t.Errorf("average with the stall: %.2f/s; the case should be one the average gets wrong", avg)
	}

	// Slow claim by claim (110 ms): no stall, and the pace shows it.
	if rate, stalls := PacedRate(claimsEvery(t0, 100, 110*time.Millisecond), stall); rate >= 9.5 || stalls != 0 {
		t.Errorf("slow: %.2f/s, %d stalls; want under 9.5/s, 0", rate, stalls)
	}

	// A token missed by a poll interval every fifth claim: each is a stall.
	var missing []time.Time
	at := t0
	for i := range 50 {
		missing = append(missing, at)
		at = at.Add(100 * time.Millisecond)
		if i%5 == 4 {
			at = at.Add(200 * time.Millisecond)
		}
	}
	if _, stalls := PacedRate(missing, stall); stalls != 9 {
		t.Errorf("missed tokens: %d stalls, want 9", stalls)
	}

	// Order does not matter; too few claims give no rate.
	rev := claimsEvery(t0, 10, 100*time.Millisecond)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	if rate, _ := PacedRate(rev, stall); rate < 9.99 || rate > 10.01 {
		t.Errorf("reversed: %.2f/s, want 10/s", rate)
	}
	if rate, stalls := PacedRate(rev[:1], stall); rate != 0 || stalls != 0 {
		t.Errorf("one claim: %.2f/s, %d stalls; want 0, 0", rate, stalls)
	}
}
