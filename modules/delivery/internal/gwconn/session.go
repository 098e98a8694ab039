package gwconn

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelwork/keel/modules/delivery/internal/framewriter"
)

// Errors are the protocol's own values for what a session reports, so
// callers can match them with errors.Is against the protocol package.
type Errors struct {
	ConnClosed   error // the connection ended (or is leaving) before the write
	WindowFull   error // wraps ctx's error when no slot freed in time
	ServerClosed error // the cause when Close ended the connection
	PeerClosed   error // the cause when the peer hung up unasked
}

// Config is what a session needs from the protocol's configuration.
type Config struct {
	// Window bounds unanswered requests and concurrent submits.
	Window       int
	WriteTimeout time.Duration
	AckTimeout   time.Duration
	// The link test: after LinkIdle with nothing received a test is sent;
	// if nothing arrives within LinkTimeout another goes at once; after
	// LinkMisses unanswered tests the peer counts as silent.
	LinkIdle, LinkTimeout time.Duration
	LinkMisses            int
	Errors                Errors
}

// Session is the protocol-independent state of one connection. V is what
// the protocol remembers per unanswered request (the CMPP Msg_Id).
type Session[V any] struct {
	nc      net.Conn
	cfg     Config
	probe   func() error
	silent  func()
	expired func(seq uint32, v V)
	ctx     context.Context // cancelled once the socket is gone
	stop    context.CancelFunc
	done    chan struct{} // closed by Stop, when the connection starts ending
	wr      *framewriter.Writer

	mu          sync.Mutex
	pending     map[uint32]*pending[V]
	late        lateAcks[V]
	established bool
	stopping    bool
	cause       error // the first reason the connection was dropped
	causeSet    bool
	leaving     atomic.Bool // we asked the peer to end the session

	window      chan struct{}
	timedOut    chan *pending[V]
	activity    chan struct{}
	submitSlots chan struct{}
	submits     sync.WaitGroup
	bg          sync.WaitGroup
}

// NewSession wraps nc; nothing runs until Start. probe sends one link
// test (an error means the writer stopped); silent is called when the
// peer missed LinkMisses of them (the protocol logs and aborts); expired
// reports a request whose ack timer fired, once its slot is free, on a
// goroutine Finish joins, so reports stop before the protocol says the
// connection is gone.
func NewSession[V any](nc net.Conn, cfg Config, probe func() error, silent func(), expired func(seq uint32, v V)) *Session[V] {
	ctx, cancel := context.WithCancel(context.Background())
	w := cfg.Window
	s := &Session[V]{
		nc: nc, cfg: cfg, probe: probe, silent: silent, expired: expired,
		ctx: ctx, stop: cancel,
		done:        make(chan struct{}),
		pending:     map[uint32]*pending[V]{},
		window:      make(chan struct{}, w),
		timedOut:    make(chan *pending[V], w),
		activity:    make(chan struct{}, 1),
		submitSlots: make(chan struct{}, w),
	}
	// The queue holds a window of requests plus responses and link tests.
	s.wr = framewriter.New(nc, 2*w+4, cfg.WriteTimeout, s.Abort)
	return s
}

// Context is cancelled once the socket is gone.
func (s *Session[V]) Context() context.Context { return s.ctx }

// Done is closed when the connection starts ending.
func (s *Session[V]) Done() <-chan struct{} { return s.done }

// Abort drops the connection at once: err becomes the cause unless an
// earlier one was recorded.
func (s *Session[V]) Abort(err error) {
	s.SetCause(err)
	s.stop()
	s.nc.Close()
}

// SetCause records err as the cause unless one is recorded already; a
// nil err recorded first makes the end clean whatever fails later.
func (s *Session[V]) SetCause(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.causeSet {
		s.cause, s.causeSet = err, true
	}
}

// Cause is the recorded cause and whether one was recorded.
func (s *Session[V]) Cause() (error, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cause, s.causeSet
}

// Terminate starts a graceful end: send asks an established peer to
// leave; a connection still in its handshake is aborted instead.
func (s *Session[V]) Terminate(send func() error) {
	s.mu.Lock()
	s.stopping = true
	est := s.established
	s.mu.Unlock()
	if !est {
		s.Abort(s.cfg.Errors.ServerClosed)
		return
	}
	s.leaving.Store(true)
	if err := send(); err != nil {
		s.Abort(s.cfg.Errors.ServerClosed)
	}
}

// Leaving reports whether we asked the peer to end the session.
func (s *Session[V]) Leaving() bool { return s.leaving.Load() }

// Start runs the writer, the link test and the ack timers once the
// handshake is done, and marks the session established; a Close that
// came during the handshake aborts it now.
func (s *Session[V]) Start() {
	s.bg.Add(3)
	go func() { defer s.bg.Done(); s.wr.Run() }()
	go func() { defer s.bg.Done(); s.keepalive() }()
	go func() { defer s.bg.Done(); s.expireLoop() }()
	s.mu.Lock()
	s.established = true
	stopping := s.stopping
	s.mu.Unlock()
	if stopping {
		s.Abort(s.cfg.Errors.ServerClosed)
	}
}

// Stop begins the end: no new requests, and running submits finish (their
// responses still go out).
func (s *Session[V]) Stop() {
	close(s.done)
	s.submits.Wait()
}

// Finish flushes the writer, closes the socket with err as the cause
// unless one is recorded, joins the session's goroutines and returns the
// cause. Requests still unanswered are forgotten.
func (s *Session[V]) Finish(err error) error {
	s.wr.Stop()
	s.Abort(err)
	s.bg.Wait()
	s.dropPending()
	cause, _ := s.Cause()
	return cause
}

// ReadErr names why reading stopped: the cause recorded by whoever
// dropped the connection, or the read error itself.
func (s *Session[V]) ReadErr(err error) error {
	if cause, ok := s.Cause(); ok {
		return cause
	}
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		if s.Leaving() {
			return nil // we asked the peer to leave and it did
		}
		return errors.Join(s.cfg.Errors.PeerClosed, err)
	}
	return err
}

// Send queues b without waiting for the write.
func (s *Session[V]) Send(b []byte) error { return s.closedAs(s.wr.Send(b)) }

// SendWait queues b and returns once it is written or cannot be.
func (s *Session[V]) SendWait(b []byte) error { return s.closedAs(s.wr.SendWait(b)) }

func (s *Session[V]) closedAs(err error) error {
	if errors.Is(err, framewriter.ErrStopped) {
		return s.cfg.Errors.ConnClosed
	}
	return err
}

// Submit runs fn on its own goroutine, at most Window at once; while all
// are busy it waits, which pushes back on the peer through TCP. fn is
// skipped when the socket is gone.
func (s *Session[V]) Submit(fn func()) {
	select {
	case s.submitSlots <- struct{}{}:
	case <-s.ctx.Done():
		return
	}
	s.submits.Add(1)
	go func() {
		defer s.submits.Done()
		defer func() { <-s.submitSlots }()
		fn()
	}()
}
