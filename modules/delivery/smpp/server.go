package smpp

import (
	"context"
	"log/slog"
	"net"

	"github.com/keelwork/keel/modules/delivery/internal/gwconn"
)

// Server is the gateway's SMPP listener (the SMSC side): ESMEs bind to
// it, submit messages and receive deliver_sm (receipts and MO).
type Server struct {
	cfg Config
	log *slog.Logger
	ids *MessageIDGenerator
	gw  *gwconn.Server[*Conn]
}

// NewServer validates cfg, fills its defaults and returns a server that
// is not yet listening.
func NewServer(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, ids: NewMessageIDGenerator(cfg.NodeID)}
	s.gw = gwconn.NewServer(gwconn.Hooks[*Conn]{Proto: "smpp", Log: cfg.Logger, Closed: ErrServerClosed,
		New: s.newConn, Serve: (*Conn).serve, Terminate: (*Conn).unbind, Abort: (*Conn).abort})
	return s, nil
}

// Start listens on Config.Addr and returns once the listener is open;
// connections are served in the background until Close. ctx bounds the
// listen call only.
func (s *Server) Start(ctx context.Context) error {
	return s.gw.Listen(ctx, s.cfg.Addr, "node_id", s.cfg.NodeID)
}

// Addr is the listening address, nil before Start.
func (s *Server) Addr() net.Addr { return s.gw.Addr() }

// Close stops accepting, sends unbind on every bound connection (and
// drops those still binding) and waits for the connections to end (the
// ESME's unbind_resp or its closing the socket). When ctx ends first the
// remaining connections are dropped and ctx's error returned. Every
// Disconnected has returned when Close returns. Close may be called
// again; later calls only wait.
func (s *Server) Close(ctx context.Context) error { return s.gw.Close(ctx) }
