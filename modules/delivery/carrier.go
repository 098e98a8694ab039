package delivery

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	cmpputils "github.com/bigwhite/gocmpp/utils"

	"github.com/keelwork/keel/modules/delivery/cmpp"
)

// carrierConfig configures the carrier simulator.
type carrierConfig struct {
	Addr    string // listen address ("127.0.0.1:0" for a free port)
	Account string // the platform's account at the carrier
	Secret  string
	// ReportDelay bounds how long after a SUBMIT its status report comes.
	MinDelay, MaxDelay time.Duration
	// Mix weights the report stats, e.g. {"DELIVRD": 90, "UNDELIV": 6, "EXPIRED": 4}.
	Mix    map[string]int
	Logger *slog.Logger
}

// carrier simulates the upstream carrier (an ISMG) over real CMPP: the
// platform connects to it as a client, submits, and receives a status
// report for each destination after a configurable delay, with a
// configurable mix of DELIVRD, UNDELIV and EXPIRED, plus MO messages on
// demand. It is the cmpp package's server with a carrier's handler.
type carrier struct {
	cfg carrierConfig
	srv *cmpp.Server

	mu     sync.Mutex
	conns  map[string]*cmpp.Conn
	rnd    *rand.Rand
	smsc   uint32
	closed bool
	timers sync.WaitGroup
	quit   chan struct{}
}

func newCarrier(cfg carrierConfig) (*carrier, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if len(cfg.Mix) == 0 {
		cfg.Mix = map[string]int{cmpp.StatDelivered: 90, cmpp.StatUndeliv: 6, cmpp.StatExpired: 4}
	}
	c := &carrier{cfg: cfg, conns: map[string]*cmpp.Conn{}, rnd: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7)),
		quit: make(chan struct{})}
	srv, err := cmpp.NewServer(cmpp.Config{Addr: cfg.Addr, GatewayID: 4242, Authenticate: c.authenticate, Handler: c,
		Location: Beijing, Logger: cfg.Logger.With("sim", "carrier")})
	if err != nil {
		return nil, err
	}
	c.srv = srv
	return c, nil
}

func (c *carrier) start(ctx context.Context) error { return c.srv.Start(ctx) }

func (c *carrier) addr() string { return c.srv.Addr().String() }

func (c *carrier) close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	close(c.quit)
	c.timers.Wait()
	return c.srv.Close(ctx)
}

func (c *carrier) authenticate(_ context.Context, source string) (*cmpp.Account, error) {
	if source != c.cfg.Account {
		return nil, nil
	}
	return &cmpp.Account{AppID: source, Secret: c.cfg.Secret}, nil
}

func (c *carrier) Connected(conn *cmpp.Conn) {
	c.mu.Lock()
	c.conns[conn.ID()] = conn
	c.mu.Unlock()
}

func (c *carrier) Disconnected(conn *cmpp.Conn, _ error) {
	c.mu.Lock()
	delete(c.conns, conn.ID())
	c.mu.Unlock()
}

func (c *carrier) DeliverResp(*cmpp.Conn, uint32, *cmpp.DeliverResp) {}

// Submit accepts the message and schedules a status report per
// destination when one was asked for.
func (c *carrier) Submit(_ context.Context, conn *cmpp.Conn, id cmpp.MsgID, s *cmpp.Submit) uint32 {
	if s.RegisteredDelivery != 1 {
		return cmpp.ResultOK
	}
	submitted := time.Now()
	for _, dest := range s.DestTerminalIDs {
		delay, stat, smsc := c.pick()
		c.later(delay, func() {
			r := &cmpp.Report{MsgID: id, Stat: stat, SubmitTime: cmpp.ReportTime(submitted.In(Beijing)),
				DoneTime: cmpp.ReportTime(time.Now().In(Beijing)), DestTerminalID: dest, SMSCSequence: smsc}
			c.deliver(&cmpp.Deliver{DestID: s.SrcID, SrcTerminalID: dest, Report: r})
		})
	}
	return cmpp.ResultOK
}

func (c *carrier) pick() (time.Duration, string, uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.cfg.MinDelay
	if span := c.cfg.MaxDelay - c.cfg.MinDelay; span > 0 {
		d += time.Duration(c.rnd.Int64N(int64(span)))
	}
	total := 0
	for _, w := range c.cfg.Mix {
		total += w
	}
	n := c.rnd.IntN(max(total, 1))
	stat := cmpp.StatDelivered
	for _, s := range []string{cmpp.StatDelivered, cmpp.StatUndeliv, cmpp.StatExpired, cmpp.StatRejected, cmpp.StatUnknown} {
		if n < c.cfg.Mix[s] {
			stat = s
			break
		}
		n -= c.cfg.Mix[s]
	}
	c.smsc++
	return d, stat, c.smsc
}

// later runs f after d unless the carrier closes first.
func (c *carrier) later(d time.Duration, f func()) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.timers.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.timers.Done()
		select {
		case <-time.After(d):
			f()
		case <-c.quit:
		}
	}()
}

var errNoPlatform = errors.New("carrier: the platform is not connected")

// deliver sends d on one of the platform's connections.
func (c *carrier) deliver(d *cmpp.Deliver) error {
	c.mu.Lock()
	var conn *cmpp.Conn
	for _, x := range c.conns {
		conn = x
		break
	}
	c.mu.Unlock()
	if conn == nil {
		return errNoPlatform
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := conn.Deliver(ctx, d)
	if err != nil {
		c.cfg.Logger.Warn("carrier: deliver", "err", err)
	}
	return err
}

// sendMO sends an MO message from phone to destID (an application's MO
// code plus extension), UCS2-encoded.
func (c *carrier) sendMO(destID, phone, text string) error {
	ucs, err := cmpputils.Utf8ToUcs2(text)
	if err != nil {
		return err
	}
	return c.deliver(&cmpp.Deliver{DestID: destID, ServiceID: "demo", MsgFmt: cmpp.FmtUCS2, SrcTerminalID: phone, Content: []byte(ucs)})
}
