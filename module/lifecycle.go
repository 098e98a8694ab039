package module

import (
	"context"
	"errors"
	"sync"
)

// ErrRunning is returned by Lifecycle.Start when a run is already going.
var ErrRunning = errors.New("already started")

// Lifecycle owns a component's background goroutines between Start and
// Stop, so that a module (or a part of one) writes neither its own cancel
// function, wait group and started flag nor the races between them:
//
//	func (m *M) Start(ctx context.Context, c *keel.Client[TTx]) error {
//		run, err := m.life.Start(ctx)
//		if err != nil {
//			return err
//		}
//		m.life.Go(m.beatLoop) // gets run, which ends on Stop
//		...
//	}
//	func (m *M) Stop(ctx context.Context) error { return m.life.Stop(ctx) }
//
// Start, Go and Stop may be called from any goroutine, in any order: Go
// outside a run does nothing, Stop without a run returns at once, and a
// stopped Lifecycle may be started again. The zero value is ready.
type Lifecycle struct {
	mu  sync.Mutex
	cur *run
}

type run struct {
	ctx    context.Context
	cancel context.CancelFunc
	n      int           // goroutines of the run still going (under Lifecycle.mu)
	idle   chan struct{} // closed while n == 0; a new one when n leaves 0
}

func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// Start begins a run and returns its context: it carries ctx's values but
// not its cancellation (a start-up context ends when start-up does), and it
// ends when Stop is called.
func (l *Lifecycle) Start(ctx context.Context) (context.Context, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != nil {
		return nil, ErrRunning
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cur = &run{ctx: rctx, cancel: cancel, idle: closed()}
	return rctx, nil
}

// Go runs f with the run's context in a goroutine that Stop waits for. It
// reports false, and does not run f, when no run is going.
func (l *Lifecycle) Go(f func(ctx context.Context)) bool {
	l.mu.Lock()
	r := l.cur
	if r == nil {
		l.mu.Unlock()
		return false
	}
	if r.n++; r.n == 1 {
		r.idle = make(chan struct{})
	}
	l.mu.Unlock()
	go func() {
		defer func() {
			l.mu.Lock()
			if r.n--; r.n == 0 {
				close(r.idle)
			}
			l.mu.Unlock()
		}()
		f(r.ctx)
	}()
	return true
}

// Running reports whether a run is going.
func (l *Lifecycle) Running() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur != nil
}

// Stop ends the run: its context is cancelled and Stop waits for every
// goroutine Go started, or until ctx ends (then it returns ctx's error and
// the goroutines finish on their own).
func (l *Lifecycle) Stop(ctx context.Context) error {
	l.mu.Lock()
	r := l.cur
	l.cur = nil
	var idle chan struct{}
	if r != nil {
		idle = r.idle // no goroutine joins r from now on: n only falls
	}
	l.mu.Unlock()
	if r == nil {
		return nil
	}
	r.cancel()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Wait blocks until every goroutine of the current run returned on its own
// (the run keeps going: Go may be called again), or ctx ends.
func (l *Lifecycle) Wait(ctx context.Context) error {
	l.mu.Lock()
	var idle chan struct{}
	if l.cur != nil {
		idle = l.cur.idle
	}
	l.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
