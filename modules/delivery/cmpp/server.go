package cmpp

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/keelwork/keel/modules/delivery/internal/gwconn"
)

// Server is the gateway's CMPP listener: customers (SPs) connect to it,
// submit messages and receive DELIVERs (status reports and MO).
type Server struct {
	cfg Config
	log *slog.Logger
	ids *MsgIDGenerator
	gw  *gwconn.Server[*Conn]
}

// NewServer validates cfg, fills its defaults and returns a server that
// is not yet listening.
func NewServer(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ids, err := NewMsgIDGenerator(cfg.GatewayID, cfg.Location)
	if err != nil {
		return nil, fmt.Errorf("cmpp config: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, ids: ids}
	s.gw = gwconn.NewServer(gwconn.Hooks[*Conn]{Proto: "cmpp", Log: cfg.Logger, Closed: ErrServerClosed,
		New: s.newConn, Serve: (*Conn).serve, Terminate: (*Conn).terminate, Abort: (*Conn).abort})
	return s, nil
}

// Start listens on Config.Addr and returns once the listener is open;
// connections are served in the background until Close. ctx bounds the
// listen call only.
func (s *Server) Start(ctx context.Context) error {
	return s.gw.Listen(ctx, s.cfg.Addr, "gateway_id", s.cfg.GatewayID)
}

// Addr is the listening address, nil before Start.
func (s *Server) Addr() net.Addr { return s.gw.Addr() }

// NewMsgID allocates a Msg_Id from the server's generator, for callers
// that want a DELIVER's Msg_Id before sending it.
func (s *Server) NewMsgID() MsgID { return s.ids.Next() }

// Close stops accepting, sends TERMINATE on every connection and waits
// for the connections to end (the client's TERMINATE_RESP or its closing
// the socket). When ctx ends first the remaining connections are dropped
// and ctx's error returned. Every Disconnected has returned when Close
// returns. Close may be called again; later calls only wait.
func (s *Server) Close(ctx context.Context) error { return s.gw.Close(ctx) }
