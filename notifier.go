package keel

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/keelwork/keel/keeldriver"
)

// notifier turns database notifications into wake-ups: inserts wake the
// queue's producer, control messages cancel running jobs. Notifications only
// wake; the database stays the authority, and polling covers any loss.
type notifier struct {
	listener keeldriver.Listener
	onCancel func(id int64)
	onLimits func()
	logger   interface {
		Warn(msg string, args ...any)
	}
	// self is this client's ID: insert notifications it announced itself
	// (tagged with it, see insertPayload) already woke its producers.
	self string
	mu   sync.Mutex
	subs map[string][]func()
	ok   bool
}

func newNotifier[TTx any](c *Client[TTx]) *notifier {
	return &notifier{
		listener: c.driver.Listener(),
		logger:   c.logger,
		self:     c.config.ID,
		subs:     map[string][]func(){},
		onLimits: c.limits.invalidate,
		onCancel: func(id int64) {
			if exe := c.registry.get(id); exe != nil {
				exe.cancel(errJobCancelled)
			}
		},
	}
}

func (n *notifier) connect(ctx context.Context) error {
	if err := n.listener.Connect(ctx); err != nil {
		return err
	}
	for _, topic := range []string{topicInsert, topicControl} {
		if err := n.listener.Listen(ctx, topic); err != nil {
			return err
		}
	}
	n.ok = true
	return nil
}

func (n *notifier) subscribe(queue string, f func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.subs[queue] = append(n.subs[queue], f)
}

// run receives until ctx ends, reconnecting with backoff after errors.
func (n *notifier) run(ctx context.Context) {
	defer func() { _ = n.listener.Close(context.Background()) }()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if !n.ok {
			if err := n.connect(ctx); err != nil {
				n.sleep(ctx, backoff)
				backoff = min(2*backoff, 10*time.Second)
				continue
			}
			backoff = 100 * time.Millisecond
		}
		note, err := n.listener.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() == nil {
				n.logger.Warn("notification listener failed; reconnecting", "error", err)
				n.ok = false
				_ = n.listener.Close(context.Background())
			}
			continue
		}
		n.dispatch(note)
	}
}

func (n *notifier) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (n *notifier) dispatch(note *keeldriver.Notification) {
	switch note.Topic {
	case topicInsert:
		queue, sender, tagged := strings.Cut(note.Payload, " ")
		if tagged && sender == n.self {
			return
		}
		n.wakeQueue(queue)
	case topicControl:
		if rest, ok := strings.CutPrefix(note.Payload, "cancel:"); ok {
			if id, err := strconv.ParseInt(rest, 10, 64); err == nil {
				n.onCancel(id)
			}
		}
		if q, ok := strings.CutPrefix(note.Payload, "queue:"); ok {
			n.wakeQueue(q)
		}
		if strings.HasPrefix(note.Payload, "flow:") {
			n.onLimits()
			n.wakeAll()
		}
	}
}

func (n *notifier) wakeAll() {
	n.mu.Lock()
	var all []func()
	for _, subs := range n.subs {
		all = append(all, subs...)
	}
	n.mu.Unlock()
	for _, f := range all {
		f()
	}
}

func (n *notifier) wakeQueue(queue string) {
	n.mu.Lock()
	subs := n.subs[queue]
	n.mu.Unlock()
	for _, f := range subs {
		f()
	}
}
