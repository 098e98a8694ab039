package cmpp

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/keelwork/keel/modules/delivery/internal/framewriter"
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
	terminating atomic.Bool

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

// Version is the layout family the connection speaks: V20 (for 0x20 and
// 0x21 clients) or V30.
func (c *Conn) Version() Version { return c.version }

// ClientVersion is the version byte the client sent in CONNECT.
func (c *Conn) ClientVersion() Version { return c.clientVersion }

// RemoteAddr is the client's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// Done is closed when the connection starts ending; no DELIVER is written
// after that.
func (c *Conn) Done() <-chan struct{} { return c.done }

// NewMsgID allocates a Msg_Id, to set Deliver.MsgID before Deliver.
func (c *Conn) NewMsgID() MsgID { return c.srv.ids.Next() }

// InFlight is the number of DELIVERs awaiting DELIVER_RESP.
func (c *Conn) InFlight() int { return len(c.window) }

func (c *Conn) nextSeq() uint32 { return c.seq.Add(1) }

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

// terminate starts a graceful end: TERMINATE on an established
// connection, an abort during the handshake.
func (c *Conn) terminate() {
	c.mu.Lock()
	c.stopping = true
	est := c.established
	c.mu.Unlock()
	if !est {
		c.abort(ErrServerClosed)
		return
	}
	c.terminating.Store(true)
	if err := c.sendPDU(c.nextSeq(), &Terminate{}); err != nil {
		c.abort(ErrServerClosed)
	}
}

// establish marks the handshake done; false when Close came first.
func (c *Conn) establish() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.established = true
	return !c.stopping
}
