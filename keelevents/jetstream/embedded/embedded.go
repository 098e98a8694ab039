// Package embedded runs a NATS server with JetStream inside the process, its
// store on disk: `keel dev` uses it so that the JetStream bus needs nothing
// installed, and tests use one per test.
//
// It listens on loopback only; it is not a production broker (no cluster,
// no authentication). `keel serve --nats-url` uses an existing server.
package embedded

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// DefaultMaxPayload lets a 1 MiB event payload travel with its headers
// (the NATS default, 1 MB, would not).
const DefaultMaxPayload = 4 << 20

// Config describes an embedded server.
type Config struct {
	// Dir is the JetStream store directory (created if missing). Running
	// again on the same Dir resumes its streams and consumers.
	Dir string
	// Port to listen on, on 127.0.0.1; 0 picks a free one.
	Port int
	// MaxPayload in bytes; DefaultMaxPayload when 0.
	MaxPayload int32
	// StartTimeout bounds the wait for the server to accept connections
	// (default 10s).
	StartTimeout time.Duration
	// Logf, if set, receives the server's notices and errors.
	Logf func(format string, args ...any)
}

// Server is a running embedded server.
type Server struct {
	s   *server.Server
	dir string
}

// Start starts a server and waits until it accepts connections.
func Start(cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("embedded nats: a store directory is required")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the NATS store directory: %w", err)
	}
	port := cfg.Port
	if port == 0 {
		port = server.RANDOM_PORT
	} else {
		// Say so at once: the server itself would only log it and never
		// become ready.
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return nil, fmt.Errorf("the embedded NATS server cannot listen on 127.0.0.1:%d: %w", port, err)
		}
		_ = l.Close()
	}
	maxPayload := cfg.MaxPayload
	if maxPayload == 0 {
		maxPayload = DefaultMaxPayload
	}
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	opts := &server.Options{
		ServerName:             "keel-embedded",
		Host:                   "127.0.0.1",
		Port:                   port,
		JetStream:              true,
		StoreDir:               cfg.Dir,
		MaxPayload:             maxPayload,
		NoSigs:                 true,
		NoLog:                  cfg.Logf == nil,
		DisableJetStreamBanner: true,
		// Monitoring, cluster and leaf-node listeners stay off.
		HTTPPort: 0,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("configuring the embedded NATS server: %w", err)
	}
	if cfg.Logf != nil {
		s.SetLoggerV2(logger{cfg.Logf}, false, false, false)
	}
	s.Start()
	if !s.ReadyForConnections(timeout) {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, fmt.Errorf("the embedded NATS server did not accept connections within %s (port %d in use?)", timeout, cfg.Port)
	}
	return &Server{s: s, dir: cfg.Dir}, nil
}

// URL is the nats:// URL clients connect to.
func (s *Server) URL() string { return s.s.ClientURL() }

// Port is the port the server listens on.
func (s *Server) Port() int {
	if a, ok := s.s.Addr().(*net.TCPAddr); ok {
		return a.Port
	}
	_, p, _ := net.SplitHostPort(s.s.Addr().String())
	n, _ := strconv.Atoi(p)
	return n
}

// Dir is the JetStream store directory.
func (s *Server) Dir() string { return s.dir }

// Shutdown stops the server and waits until it has stopped; the store stays
// on disk.
func (s *Server) Shutdown() {
	s.s.Shutdown()
	s.s.WaitForShutdown()
}

// logger adapts the server's logger interface to a printf function.
type logger struct{ f func(string, ...any) }

func (l logger) Noticef(format string, v ...any) { l.f("nats: "+format, v...) }
func (l logger) Warnf(format string, v ...any)   { l.f("nats warning: "+format, v...) }
func (l logger) Fatalf(format string, v ...any)  { l.f("nats fatal: "+format, v...) }
func (l logger) Errorf(format string, v ...any)  { l.f("nats error: "+format, v...) }
func (l logger) Debugf(string, ...any)           {}
func (l logger) Tracef(string, ...any)           {}
