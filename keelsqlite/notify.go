package keelsqlite

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/keelwork/keel/keeldriver"
)

// hub is the in-process pub/sub that stands in for LISTEN/NOTIFY. Publishing
// never blocks on a slow listener: each listener has a bounded queue and a
// one-slot wake channel.
type hub struct {
	mu        sync.Mutex
	buffer    int
	listeners map[*listener]struct{}
	closed    bool
}

func newHub(buffer int) *hub {
	return &hub{buffer: buffer, listeners: map[*listener]struct{}{}}
}

func (h *hub) newListener() *listener {
	l := &listener{
		hub:    h,
		topics: map[string]struct{}{},
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		l.closeLocked()
		return l
	}
	h.listeners[l] = struct{}{}
	return l
}

func (h *hub) publish(topic, payload string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.listeners {
		l.deliver(h.buffer, topic, payload)
	}
}

func (h *hub) remove(l *listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.listeners, l)
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for l := range h.listeners {
		l.mu.Lock()
		l.closeLocked()
		l.mu.Unlock()
	}
	clear(h.listeners)
}

// listener is one subscriber. Lock order: hub.mu before listener.mu.
type listener struct {
	hub    *hub
	mu     sync.Mutex
	topics map[string]struct{}
	queue  []keeldriver.Notification
	wake   chan struct{} // capacity 1: a pending wake-up coalesces the rest
	done   chan struct{} // closed by Close or by the Driver closing
	closed bool
	// blocked counts callers of WaitForNotification asleep in it, so a test
	// can wait until one is blocked instead of sleeping.
	blocked atomic.Int32
}

var _ keeldriver.Listener = (*listener)(nil)

// deliver queues the notification if l listens on topic. A full queue drops
// it: the queue is non-empty, so the listener is awake anyway and polling
// catches whatever the lost message announced. An identical message already
// queued makes the new one redundant.
func (l *listener) deliver(buffer int, topic, payload string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.topics[topic]; !ok || l.closed {
		return
	}
	n := keeldriver.Notification{Topic: topic, Payload: payload}
	if len(l.queue) < buffer && !l.queuedLocked(n) {
		l.queue = append(l.queue, n)
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// queuedLocked reports whether n is already waiting; only the tail is checked
// so that a burst of identical wake-ups (the common case) costs O(1).
func (l *listener) queuedLocked(n keeldriver.Notification) bool {
	return len(l.queue) > 0 && l.queue[len(l.queue)-1] == n
}

func (l *listener) closeLocked() {
	if !l.closed {
		l.closed = true
		close(l.done)
	}
}

// Connect has nothing to connect to; it only reports a closed listener.
func (l *listener) Connect(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return keeldriver.ErrClosed
	}
	return nil
}

// Listen subscribes to topic.
func (l *listener) Listen(ctx context.Context, topic string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return keeldriver.ErrClosed
	}
	l.topics[topic] = struct{}{}
	return nil
}

// Unlisten unsubscribes from topic; queued messages of it are dropped.
func (l *listener) Unlisten(ctx context.Context, topic string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return keeldriver.ErrClosed
	}
	delete(l.topics, topic)
	kept := l.queue[:0]
	for _, n := range l.queue {
		if n.Topic != topic {
			kept = append(kept, n)
		}
	}
	l.queue = kept
	return nil
}

// WaitForNotification returns the oldest queued notification, waiting for one
// until ctx ends or the listener (or its Driver) closes.
func (l *listener) WaitForNotification(ctx context.Context) (*keeldriver.Notification, error) {
	for {
		if n, err := l.pop(); n != nil || err != nil {
			return n, err
		}
		l.blocked.Add(1)
		select {
		case <-l.wake:
		case <-l.done:
		case <-ctx.Done():
			l.blocked.Add(-1)
			return nil, fmt.Errorf("keelsqlite: waiting for notification: %w", ctx.Err())
		}
		l.blocked.Add(-1)
	}
}

func (l *listener) pop() (*keeldriver.Notification, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, keeldriver.ErrClosed
	}
	if len(l.queue) == 0 {
		return nil, nil
	}
	n := l.queue[0]
	l.queue[0] = keeldriver.Notification{}
	l.queue = l.queue[1:]
	return &n, nil
}

// Close detaches the listener and wakes a pending WaitForNotification.
func (l *listener) Close(ctx context.Context) error {
	l.hub.remove(l)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closeLocked()
	l.queue = nil
	return nil
}
