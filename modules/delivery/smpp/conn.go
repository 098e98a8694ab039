package smpp

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/keelwork/keel/modules/delivery/internal/framewriter"
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

	ctx    context.Context // cancelled once the socket is gone
	cancel context.CancelFunc

	done chan struct{} // closed by teardown, when the connection starts ending

	wr *framewriter.Writer

	seq         atomic.Uint32
	window      chan struct{}
	mu          sync.Mutex
	pending     map[uint32]*pending
	late        lateAcks
	expired     chan *pending
	established bool
	stopping    bool
	cause       error // the first reason the connection was dropped
	causeSet    bool
	unbinding   atomic.Bool // we sent unbind

	activity    chan struct{}
	submitSlots chan struct{}
	submits     sync.WaitGroup
	bg          sync.WaitGroup
}

func newConn(s *Server, nc net.Conn, id string) *Conn {
	ctx, cancel := context.WithCancel(context.Background())
	w := s.cfg.Window
	c := &Conn{
		srv: s, nc: nc, br: bufio.NewReader(nc), id: id,
		log: s.log.With("conn", id, "remote", nc.RemoteAddr().String()),
		ctx: ctx, cancel: cancel,
		done:        make(chan struct{}),
		window:      make(chan struct{}, w),
		pending:     map[uint32]*pending{},
		expired:     make(chan *pending, w),
		activity:    make(chan struct{}, 1),
		submitSlots: make(chan struct{}, w),
	}
	// The queue holds a window of DELIVERs plus responses and link tests.
	c.wr = framewriter.New(nc, 2*w+4, s.cfg.WriteTimeout, c.abort)
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
func (c *Conn) Done() <-chan struct{} { return c.done }

// InFlight is the number of deliver_sm awaiting a response.
func (c *Conn) InFlight() int { return len(c.window) }

// nextSeq skips 0 and wraps within the range SMPP allows.
func (c *Conn) nextSeq() uint32 { return (c.seq.Add(1)-1)%maxSeq + 1 }

// abort drops the connection at once: err becomes the Disconnected error
// unless an earlier one was recorded.
func (c *Conn) abort(err error) {
	c.setCause(err)
	c.cancel()
	c.nc.Close()
}

func (c *Conn) setCause(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.causeSet {
		c.cause, c.causeSet = err, true
	}
}

func (c *Conn) getCause() (error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause, c.causeSet
}

// unbind starts a graceful end: unbind on a bound connection, an abort
// while still binding.
func (c *Conn) unbind() {
	c.mu.Lock()
	c.stopping = true
	est := c.established
	c.mu.Unlock()
	if !est {
		c.abort(ErrServerClosed)
		return
	}
	c.unbinding.Store(true)
	if err := c.sendPDU(c.nextSeq(), &Unbind{}); err != nil {
		c.abort(ErrServerClosed)
	}
}

// establish marks the bind done; false when Close came first.
func (c *Conn) establish() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.established = true
	return !c.stopping
}
