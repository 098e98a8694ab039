package smpp

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

// Server is the gateway's SMPP listener (the SMSC side): ESMEs bind to
// it, submit messages and receive deliver_sm (receipts and MO).
type Server struct {
	cfg   Config
	log   *slog.Logger
	ids   *MessageIDGenerator
	nonce string
	count atomic.Uint64

	mu     sync.Mutex
	ln     net.Listener
	conns  map[*Conn]struct{}
	closed bool
	wg     sync.WaitGroup // the accept loop and every connection
}

// NewServer validates cfg, fills its defaults and returns a server that
// is not yet listening.
func NewServer(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var nonce [4]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("reading connection id nonce: %w", err)
	}
	return &Server{
		cfg: cfg, log: cfg.Logger, ids: NewMessageIDGenerator(cfg.NodeID),
		nonce: hex.EncodeToString(nonce[:]),
		conns: map[*Conn]struct{}{},
	}, nil
}

// Start listens on Config.Addr and returns once the listener is open;
// connections are served in the background until Close. ctx bounds the
// listen call only.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrServerClosed
	}
	if s.ln != nil {
		return errors.New("smpp: server already started")
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.cfg.Addr, err)
	}
	s.ln = ln
	s.wg.Add(1)
	go s.acceptLoop(ln)
	s.log.Info("smpp server listening", "addr", ln.Addr().String(), "node_id", s.cfg.NodeID)
	return nil
}

// Addr is the listening address, nil before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Close stops accepting, sends unbind on every bound connection (and
// drops those still binding) and waits for the connections to end (the
// ESME's unbind_resp or its closing the socket). When ctx ends first the
// remaining connections are dropped and ctx's error returned. Every
// Disconnected has returned when Close returns. Close may be called
// again; later calls only wait.
func (s *Server) Close(ctx context.Context) error {
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
			c.unbind()
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
			c.abort(ErrServerClosed)
		}
		<-done
		return fmt.Errorf("closing smpp server: %w", ctx.Err())
	}
}

func (s *Server) snapshot() []*Conn {
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}

func (s *Server) acceptLoop(ln net.Listener) {
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
			s.log.Error("smpp accept failed", "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		s.admit(nc)
	}
}

// admit registers and serves a new socket unless the server is closing.
func (s *Server) admit(nc net.Conn) {
	c := newConn(s, nc, fmt.Sprintf("%s-%d", s.nonce, s.count.Add(1)))
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
		c.serve()
	}()
}

func (s *Server) forget(c *Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}
