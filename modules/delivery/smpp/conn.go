package smpp

import (
	"bufio"
	"log/slog"
	"net"
	"sync/atomic"

	"github.com/keelwork/keel/modules/delivery/internal/gwconn"
)

// maxSeq is the largest sequence_number; SMPP numbers run 1 to 0x7FFFFFFF.
const maxSeq = 0x7FFFFFFF

// Conn is one bound ESME connection. Its methods are safe for concurrent
// use.
type Conn struct {
	srv *Server
	nc  net.Conn
	br  *bufio.Reader
	id  string
	log *slog.Logger

	// Set by the bind, read-only afterwards.
	bindType  BindType
	systemID  string
	ifVersion uint8
	account   Account

	s   *gwconn.Session[struct{}]
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

// SystemID is the system_id the ESME bound with.
func (c *Conn) SystemID() string { return c.systemID }

// BindType is how the ESME bound; only receivers and transceivers may be
// sent deliver_sm.
func (c *Conn) BindType() BindType { return c.bindType }

// InterfaceVersion is the interface_version of the bind (0x34 for 3.4).
func (c *Conn) InterfaceVersion() uint8 { return c.ifVersion }

// RemoteAddr is the ESME's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// Done is closed when the connection starts ending; no deliver_sm is
// written after that.
func (c *Conn) Done() <-chan struct{} { return c.s.Done() }

// InFlight is the number of deliver_sm awaiting a response.
func (c *Conn) InFlight() int { return c.s.InFlight() }

// nextSeq skips 0 and wraps within the range SMPP allows.
func (c *Conn) nextSeq() uint32 { return (c.seq.Add(1)-1)%maxSeq + 1 }

// abort drops the connection at once: err becomes the Disconnected error
// unless an earlier one was recorded.
func (c *Conn) abort(err error) { c.s.Abort(err) }

// unbind starts a graceful end: unbind on a bound connection, an abort
// while still binding.
func (c *Conn) unbind() {
	c.s.Terminate(func() error { return c.sendPDU(c.nextSeq(), &Unbind{}) })
}

// probe sends one link test.
func (c *Conn) probe() error { return c.sendPDU(c.nextSeq(), &EnquireLink{}) }

// silent drops a peer that missed EnquireLinkMisses enquire_links.
func (c *Conn) silent() {
	c.log.Warn("smpp enquire_link unanswered, dropping", "misses", c.srv.cfg.EnquireLinkMisses)
	c.abort(ErrEnquireLinkTimeout)
}
