// Package gwconn is the connection lifecycle of the gateway's server side,
// kept apart from the CMPP package so that any customer protocol shares it:
// accepting and closing, a session's cause of death and graceful end, the
// window of unanswered requests and the idle-time link test. A protocol
// keeps its PDUs, handshakes and logging; this package only decides when
// things happen, so every gateway ends, times out and pushes back alike.
package gwconn

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Hooks are a protocol's side of a server: how to wrap a socket and how to
// run, end politely and drop one of its connections.
type Hooks[C comparable] struct {
	// Proto names the protocol in log messages and errors ("cmpp").
	Proto string
	Log   *slog.Logger
	// Closed is the protocol's ErrServerClosed: Listen's answer after
	// Close, and the abort cause of connections Close had to drop.
	Closed error
	// New wraps a socket; log already names the connection and its peer.
	New       func(nc net.Conn, id string, log *slog.Logger) C
	Serve     func(C)
	Terminate func(C)
	Abort     func(C, error)
}

// Server accepts sockets and tracks their connections until Close.
type Server[C comparable] struct {
	h     Hooks[C]
	nonce string
	count atomic.Uint64

	mu     sync.Mutex
	ln     net.Listener
	conns  map[C]struct{}
	closed bool
	wg     sync.WaitGroup // the accept loop and every connection
}

// NewServer returns a server that is not yet listening.
func NewServer[C comparable](h Hooks[C]) *Server[C] {
	// The nonce keeps connection ids apart across restarts and instances;
	// crypto/rand.Read never returns an error (it crashes instead).
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	return &Server[C]{h: h, nonce: hex.EncodeToString(nonce[:]), conns: map[C]struct{}{}}
}

// Listen opens addr and accepts on it in the background until Close; ctx
// bounds the listen call only. attrs are logged with the address.
func (s *Server[C]) Listen(ctx context.Context, addr string, attrs ...any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.h.Closed
	}
	if s.ln != nil {
		return fmt.Errorf("%s: server already started", s.h.Proto)
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	s.ln = ln
	s.wg.Add(1)
	go s.acceptLoop(ln)
	s.h.Log.Info(s.h.Proto+" server listening", append([]any{"addr", ln.Addr().String()}, attrs...)...)
	return nil
}

// Addr is the listening address, nil before Listen.
func (s *Server[C]) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Close stops accepting, ends every connection gracefully and waits for
// them. When ctx ends first the remaining connections are aborted with
// Hooks.Closed and ctx's error returned. Later calls only wait.
func (s *Server[C]) Close(ctx context.Context) error {
	s.mu.Lock()
	first := !s.closed
	s.closed = true
	ln := s.ln
	conns := s.snapshot()
	s.mu.Unlock()
	if first {
		if ln != nil {
			ln.Close()
		}
		for _, c := range conns {
			s.h.Terminate(c)
		}
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		conns = s.snapshot()
		s.mu.Unlock()
		for _, c := range conns {
			s.h.Abort(c, s.h.Closed)
		}
		<-done
		return fmt.Errorf("closing %s server: %w", s.h.Proto, ctx.Err())
	}
}

func (s *Server[C]) snapshot() []C {
	conns := make([]C, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}

func (s *Server[C]) acceptLoop(ln net.Listener) {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary failures (out of file descriptors) must not spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.h.Log.Error(s.h.Proto+" accept failed", "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		s.admit(nc)
	}
}

// admit registers and serves a new socket unless the server is closing.
func (s *Server[C]) admit(nc net.Conn) {
	id := fmt.Sprintf("%s-%d", s.nonce, s.count.Add(1))
	c := s.h.New(nc, id, s.h.Log.With("conn", id, "remote", nc.RemoteAddr().String()))
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer s.forget(c)
		s.h.Serve(c)
	}()
}

func (s *Server[C]) forget(c C) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}
