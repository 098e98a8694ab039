package gwconn

import (
	"context"
	"fmt"
	"time"
)

// lateAckMemory is how many timed-out requests a session remembers so a
// late response can still be reported.
const lateAckMemory = 256

// pending is one request awaiting its response.
type pending[V any] struct {
	seq   uint32
	v     V
	timer *time.Timer
}

// lateAcks is a bounded memory of timed-out requests.
type lateAcks[V any] struct {
	vs    map[uint32]V
	order []uint32
}

func (l *lateAcks[V]) add(seq uint32, v V) {
	if l.vs == nil {
		l.vs = map[uint32]V{}
	}
	if len(l.order) == lateAckMemory {
		delete(l.vs, l.order[0])
		l.order = l.order[1:]
	}
	l.vs[seq] = v
	l.order = append(l.order, seq)
}

func (l *lateAcks[V]) take(seq uint32) (V, bool) {
	v, ok := l.vs[seq]
	delete(l.vs, seq) // its entry in order just ages out
	return v, ok
}

// InFlight is the number of requests awaiting a response.
func (s *Session[V]) InFlight() int { return len(s.window) }

// Request sends one request through the window: it takes a slot, waiting
// while Window requests are unanswered (if ctx ends first the error wraps
// Errors.WindowFull and ctx's error), calls encode for the sequence
// number, the value to remember and the bytes, and returns once they are
// written. The ack timer starts then; the slot frees on Resolve or when
// AckTimeout passes. what names the request in errors.
func (s *Session[V]) Request(ctx context.Context, what string, encode func() (uint32, V, []byte, error)) (uint32, error) {
	if err := s.acquire(ctx); err != nil {
		return 0, err
	}
	seq, v, b, err := encode()
	if err != nil {
		<-s.window
		return 0, err
	}
	p := s.track(seq, v)
	if err := s.SendWait(b); err != nil {
		s.Resolve(seq)
		return 0, fmt.Errorf("writing %s seq %d: %w", what, seq, err)
	}
	s.arm(p)
	return seq, nil
}

func (s *Session[V]) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.Leaving() {
		return s.cfg.Errors.ConnClosed // no requests after we asked the peer to leave
	}
	select {
	case <-s.done:
		return s.cfg.Errors.ConnClosed
	default:
	}
	select {
	case s.window <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", s.cfg.Errors.WindowFull, ctx.Err())
	case <-s.done:
		return s.cfg.Errors.ConnClosed
	}
}

func (s *Session[V]) track(seq uint32, v V) *pending[V] {
	p := &pending[V]{seq: seq, v: v}
	s.mu.Lock()
	s.pending[seq] = p
	s.mu.Unlock()
	return p
}

// arm starts the ack timer once the request is on the wire, unless the
// response already came.
func (s *Session[V]) arm(p *pending[V]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[p.seq] != p {
		return
	}
	p.timer = time.AfterFunc(s.cfg.AckTimeout, func() {
		select {
		case s.timedOut <- p:
		case <-s.ctx.Done():
		}
	})
}

// Resolve removes seq from the unanswered requests and frees its slot;
// false when seq was not outstanding.
func (s *Session[V]) Resolve(seq uint32) (V, bool) {
	s.mu.Lock()
	p, ok := s.pending[seq]
	if ok {
		delete(s.pending, seq)
		if p.timer != nil {
			p.timer.Stop()
		}
	}
	s.mu.Unlock()
	if !ok {
		var zero V
		return zero, false
	}
	<-s.window
	return p.v, true
}

// Outstanding reports whether seq awaits a response.
func (s *Session[V]) Outstanding(seq uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pending[seq]
	return ok
}

// TakeLate reports (once) whether seq is a request that timed out, with
// its value.
func (s *Session[V]) TakeLate(seq uint32) (V, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.late.take(seq)
}

// expireLoop runs on a goroutine of its own so Finish can join the
// reports.
func (s *Session[V]) expireLoop() {
	for {
		select {
		case p := <-s.timedOut:
			s.expire(p)
		case <-s.ctx.Done():
			return
		}
	}
}

func (s *Session[V]) expire(p *pending[V]) {
	s.mu.Lock()
	if s.pending[p.seq] != p {
		s.mu.Unlock()
		return
	}
	delete(s.pending, p.seq)
	s.late.add(p.seq, p.v)
	s.mu.Unlock()
	<-s.window
	s.expired(p.seq, p.v)
}

// dropPending forgets unanswered requests when the connection ends; the
// protocol's handler learns of them through its disconnect report.
func (s *Session[V]) dropPending() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for seq, p := range s.pending {
		if p.timer != nil {
			p.timer.Stop()
		}
		delete(s.pending, seq)
	}
}
