package keel

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// announceTimeout bounds one insert notification; a notification that
// cannot be sent costs other instances a poll interval, nothing more.
const announceTimeout = 5 * time.Second

// announceSpacing is the least time between two rounds of notifications.
// On PostgreSQL a NOTIFY is a transaction of its own with a durable commit,
// and notifying transactions hold one lock through their commit: back to
// back, the rounds added about one commit per insert at 1,000 inserts/s
// (41,585 commits for 10,000 jobs against 28,114 without them), and every
// insert's and claim's commit waited behind them for the WAL. Spaced, a
// sustained stream of inserts costs at most one notifying commit per queue
// per spacing. The first insert after a quiet spell is announced at once;
// only other instances can wait the spacing, and the inserting process's
// own fetchers are woken directly.
const announceSpacing = 10 * time.Millisecond

// announcer sends the insert notifications of committed inserts, off the
// inserting goroutine and coalesced per queue.
//
// Off the inserting goroutine, because the notification is a round trip of
// its own after the insert's commit (see insertRows for why it cannot ride
// in the insert's transaction), and Insert returning after it added that
// round trip to every caller, and to this process's own enqueue→start
// latency when the local wake-up came after it. Coalesced, because under
// load one NOTIFY per queue per round says all that a thousand would:
// listeners fetch everything available whatever woke them. PostgreSQL
// serializes notifying transactions on one lock, so fewer of them also
// leaves more of the server to the work itself.
type announcer struct {
	notify  func(ctx context.Context, queue string) error
	logger  *slog.Logger
	spacing time.Duration

	mu      sync.Mutex
	pending map[string]struct{}
	sending bool
	idle    *sync.Cond
}

func newAnnouncer(notify func(ctx context.Context, queue string) error, logger *slog.Logger) *announcer {
	a := &announcer{notify: notify, logger: logger, spacing: announceSpacing, pending: map[string]struct{}{}}
	a.idle = sync.NewCond(&a.mu)
	return a
}

// announce schedules a notification for each queue. At most one sender runs;
// queues added while it sends go out in its next round, so every insert is
// followed by a notification sent after its commit.
func (a *announcer) announce(queues []string) {
	if len(queues) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, q := range queues {
		a.pending[q] = struct{}{}
	}
	if !a.sending {
		a.sending = true
		go a.send()
	}
}

func (a *announcer) send() {
	var last time.Time
	for {
		if !last.IsZero() {
			// Queues announced during the last round or the spacing go
			// out together in the next one.
			time.Sleep(time.Until(last.Add(a.spacing)))
		}
		a.mu.Lock()
		round := a.pending
		if len(round) == 0 {
			a.sending = false
			a.idle.Broadcast()
			a.mu.Unlock()
			return
		}
		a.pending = map[string]struct{}{}
		a.mu.Unlock()
		last = time.Now()
		for q := range round {
			ctx, cancel := context.WithTimeout(context.Background(), announceTimeout)
			if err := a.notify(ctx, q); err != nil {
				a.logger.Warn("insert notification failed; fetchers will poll", "queue", q, "error", err)
			}
			cancel()
		}
	}
}

// flush waits until every scheduled notification has been sent (or has
// failed), so a stopping client does not close its driver under one.
func (a *announcer) flush() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.sending {
		a.idle.Wait()
	}
}
