package delivery

import (
	"context"
	"testing"
	"time"
)

// TestPacerSpacesWriteInstants: a write held up after its slot (a task
// item's last check waiting on the database) pushes the next write of the
// key back, so the customer never gets two writes less than an interval
// apart; other keys and unlimited keys are not held.
func TestPacerSpacesWriteInstants(t *testing.T) {
	t.Parallel()
	p := newPacer()
	const rate = 5.0
	gap := paceGap(rate)
	if d := p.turn("k", rate); d != 0 {
		t.Fatalf("the first write of a key waited %s", d)
	}
	wrote := time.Now()
	d := p.turn("k", rate)
	if d <= 0 || d > gap {
		t.Fatalf("a second write at once: told to wait %s, want (0, %s]", d, gap)
	}
	if d := p.turn("other", rate); d != 0 {
		t.Fatalf("another key waited %s", d)
	}
	if d := p.turn("k", 0); d != 0 {
		t.Fatalf("an unlimited write waited %s", d)
	}
	// The next slot of k is a full interval after the write's instant,
	// not after the slot it was given.
	if _, err := p.wait(context.Background(), "k", rate, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got := time.Since(wrote); got < gap {
		t.Fatalf("the next slot came %s after the last write; the interval is %s", got, gap)
	}
	if d := p.turn("k", rate); d != 0 {
		t.Fatalf("a write at its slot was held %s more", d)
	}
}
