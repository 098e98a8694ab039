package cmpp

import (
	"bufio"
	"log/slog"
	"net"
	"sync/atomic"

	"github.com/keelwork/keel/modules/delivery/internal/gwconn"
)

// Conn is one authenticated customer connection. Its methods are safe for
// concurrent use.
type Conn struct {
	srv *Server
	nc  net.Conn
	br  *bufio.Reader
	id  string
	log *slog.Logger

	// Set by the handshake, read-only afterwards.
	version       Version // layout family: V20 or V30
	clientVersion Version // the byte the client sent
	account       Account
	reportLayout  Version

	s   *gwconn.Session[MsgID]
	seq atomic.Uint32
}

func (s *Server) newConn(nc net.Conn, id string, log *slog.Logger) *Conn {
	c := &Conn{srv: s, nc: nc, br: bufio.NewReader(nc), id: id, log: log}
	c.s = gwconn.NewSession(nc, s.cfg.session(), c.probe, c.silent, c.expire)
	return c
}

// ID is unique per connection (a per-server random prefix and a counter).
func (c *Conn) ID() string { return c.id }

// AppID is the authenticated account's application.
func (c *Conn) AppID() string { return c.account.AppID }

// Version is the layout family the connection speaks: V20 (for 0x20 and
// 0x21 clients) or V30.
func (c *Conn) Version() Version { return c.version }

// ClientVersion is the version byte the client sent in CONNECT.
func (c *Conn) ClientVersion() Version { return c.clientVersion }

// RemoteAddr is the client's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// Done is closed when the connection starts ending; no DELIVER is written
// after that.
func (c *Conn) Done() <-chan struct{} { return c.s.Done() }

// NewMsgID allocates a Msg_Id, to set Deliver.MsgID before Deliver.
func (c *Conn) NewMsgID() MsgID { return c.srv.ids.Next() }

// InFlight is the number of DELIVERs awaiting DELIVER_RESP.
func (c *Conn) InFlight() int { return c.s.InFlight() }

func (c *Conn) nextSeq() uint32 { return c.seq.Add(1) }

// abort drops the connection at once: err becomes the Disconnected error
// unless an earlier one was recorded.
func (c *Conn) abort(err error) { c.s.Abort(err) }

// terminate starts a graceful end: TERMINATE on an established
// connection, an abort during the handshake.
func (c *Conn) terminate() {
	c.s.Terminate(func() error { return c.sendPDU(c.nextSeq(), &Terminate{}) })
}

// probe sends one link test.
func (c *Conn) probe() error { return c.sendPDU(c.nextSeq(), &ActiveTest{}) }

// silent drops a peer that missed ActiveTestMisses link tests.
func (c *Conn) silent() {
	c.log.Warn("cmpp active test unanswered, dropping", "misses", c.srv.cfg.ActiveTestMisses)
	c.abort(ErrActiveTestTimeout)
}
