package keel

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// TestAnnouncerCoalescesAndSpaces: inserts announced while a notification is
// in flight go out together in one later round, that round starts no sooner
// than the spacing after the previous one, and the last insert is still
// followed by a notification.
func TestAnnouncerCoalescesAndSpaces(t *testing.T) {
	t.Parallel()
	release, started := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var sent []time.Time
	var queues []string
	a := newAnnouncer(func(ctx context.Context, queue string) error {
		mu.Lock()
		first := len(sent) == 0
		sent = append(sent, time.Now())
		queues = append(queues, queue)
		mu.Unlock()
		if first {
			close(started)
			<-release
		}
		return nil
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	a.spacing = 50 * time.Millisecond

	// The announcer stamps a round's start just before it calls notify, so
	// the first stamp here can trail it; the round begins after begin,
	// which bounds the spacing from below without that lag.
	begin := time.Now()
	a.announce([]string{"default"})
	<-started
	for range 100 {
		a.announce([]string{"default"})
	}
	a.announce([]string{"other"})
	close(release)
	a.flush()

	mu.Lock()
	if len(sent) != 3 {
		t.Fatalf("notifications = %d (%v), want 3: the first round, then both queues once", len(sent), queues)
	}
	if queues[0] != "default" {
		t.Fatalf("first notification for %q, want default", queues[0])
	}
	if gap := sent[1].Sub(begin); gap < a.spacing {
		t.Fatalf("second round %v after the first was announced, want at least the spacing %v", gap, a.spacing)
	}
	if got := map[string]bool{queues[1]: true, queues[2]: true}; !got["default"] || !got["other"] {
		t.Fatalf("second round notified %v, want default and other", queues[1:])
	}

	mu.Unlock()

	// After a quiet spell the next announcement goes out on its own round.
	a.announce([]string{"default"})
	a.flush()
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 4 {
		t.Fatalf("notifications after a quiet spell = %d, want 4", len(sent))
	}
}
