// Package testwait is the one way tests wait for a condition of the system
// under test: poll it until it holds or a deadline passes, never sleep a
// fixed time and hope. Module tests reach it as moduletest.WaitFor.
package testwait

import (
	"testing"
	"time"
)

// For polls cond until it holds, failing t after within. Polling starts
// at a millisecond and backs off to 20 ms, so a condition that holds at
// once costs nothing and a slow one does not spin.
func For(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// Until polls cond like For and reports whether it held within the time,
// without failing anything: for a goroutine that releases a simulator's
// answer once the system under test reached a state (the test's own wait
// then reports what did not happen).
func Until(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
	return true
}
