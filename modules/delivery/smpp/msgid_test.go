package smpp_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelwork/keel/modules/delivery/smpp"
)

// An id is the node in 4 hex digits, then the counter in 16, which
// starts at the clock in microseconds.
func TestMessageIDFormat(t *testing.T) {
	before := fmt.Sprintf("%016x", time.Now().UnixMicro())
	id := smpp.NewMessageIDGenerator(0xbeef).Next()
	if len(id) != smpp.MessageIDLen || !strings.HasPrefix(id, "beef") || strings.Trim(id, "0123456789abcdef") != "" {
		t.Fatalf("id %q", id)
	}
	if id[4:] < before {
		t.Errorf("counter %s is behind the clock %s", id[4:], before)
	}
}

// Concurrent callers never get the same id, and one caller's ids increase.
func TestMessageIDUniqueConcurrent(t *testing.T) {
	g := smpp.NewMessageIDGenerator(1)
	const workers, each = 8, 2000
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			prev := ""
			local := make([]string, 0, each)
			for range each {
				id := g.Next()
				if id <= prev {
					t.Errorf("%s after %s", id, prev)
				}
				prev = id
				local = append(local, id)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range local {
				if seen[id] {
					t.Errorf("repeated id %s", id)
				}
				seen[id] = true
			}
		})
	}
	wg.Wait()
}

// A clock that steps back, or stands still, does not repeat an id; a
// new generator (a restart) starts past the ids of the old one.
func TestMessageIDClockSteps(t *testing.T) {
	at := time.Date(2026, 8, 14, 15, 30, 0, 0, time.UTC)
	g := smpp.NewMessageIDGenerator(2)
	smpp.SetClock(g, func() time.Time { return at })
	a, b := g.Next(), g.Next()
	at = at.Add(-time.Hour)
	c := g.Next()
	if !(a < b && b < c) {
		t.Errorf("ids %s %s %s do not increase", a, b, c)
	}
	at = at.Add(2 * time.Hour)
	restarted := smpp.NewMessageIDGenerator(2)
	smpp.SetClock(restarted, func() time.Time { return at })
	if d := restarted.Next(); d <= c {
		t.Errorf("restarted generator issued %s, not after %s", d, c)
	}
}
