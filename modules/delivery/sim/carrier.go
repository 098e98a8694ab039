package sim

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

// CarrierConfig configures the carrier simulator.
type CarrierConfig struct {
	Addr    string // listen address ("127.0.0.1:0" for a free port)
	Account string // the platform's account at the carrier
	Secret  string
	// ReportDelay bounds how long after a SUBMIT its status report comes.
	MinDelay, MaxDelay time.Duration
	// Mix weights the report stats, e.g. {"DELIVRD": 90, "UNDELIV": 6, "EXPIRED": 4}.
	Mix map[string]int
	// Location is the zone of the report times the carrier writes; nil:
	// China Standard Time, as Chinese carriers write them.
	Location *time.Location
	Logger   *slog.Logger
}

var chinaStandardTime = time.FixedZone("CST", 8*3600)

// Carrier simulates the upstream carrier (an ISMG) over real CMPP: the
// platform connects to it as a client, submits, and receives a status
// report for each destination after a configurable delay, with a
// configurable mix of DELIVRD, UNDELIV and EXPIRED, plus MO messages on
// demand. It is the cmpp package's server with a carrier's handler.
type Carrier struct {
	cfg CarrierConfig
	srv *cmpp.Server

	mu     sync.Mutex
	conns  map[string]*cmpp.Conn
	rnd    *rand.Rand
	smsc   uint32
	closed bool
	timers sync.WaitGroup
	quit   chan struct{}
}

func NewCarrier(cfg CarrierConfig) (*Carrier, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Location == nil {
		cfg.Location = chinaStandardTime
	}
	if len(cfg.Mix) == 0 {
		cfg.Mix = map[string]int{cmpp.StatDelivered: 90, cmpp.StatUndeliv: 6, cmpp.StatExpired: 4}
	}
	c := &Carrier{cfg: cfg, conns: map[string]*cmpp.Conn{}, rnd: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7)),
		quit: make(chan struct{})}
	srv, err := cmpp.NewServer(cmpp.Config{Addr: cfg.Addr, GatewayID: 4242, Authenticate: c.authenticate, Handler: c,
		Location: cfg.Location, Logger: cfg.Logger.With("sim", "carrier")})
	if err != nil {
		return nil, err
	}
	c.srv = srv
	return c, nil
}

// Start listens; the carrier serves until Close.
func (c *Carrier) Start(ctx context.Context) error { return c.srv.Start(ctx) }

// Addr is the address the carrier listens on.
func (c *Carrier) Addr() string { return c.srv.Addr().String() }

// Close stops the carrier; reports not sent yet are dropped.
func (c *Carrier) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	close(c.quit)
	c.timers.Wait()
	return c.srv.Close(ctx)
}

func (c *Carrier) authenticate(_ context.Context, source string) (*cmpp.Account, error) {
	if source != c.cfg.Account {
		return nil, nil
	}
	return &cmpp.Account{AppID: source, Secret: c.cfg.Secret}, nil
}

func (c *Carrier) Connected(conn *cmpp.Conn) {
	c.mu.Lock()
	c.conns[conn.ID()] = conn
	c.mu.Unlock()
}

func (c *Carrier) Disconnected(conn *cmpp.Conn, _ error) {
	c.mu.Lock()
	delete(c.conns, conn.ID())
	c.mu.Unlock()
}

func (c *Carrier) DeliverResp(*cmpp.Conn, uint32, *cmpp.DeliverResp) {}

// Submit accepts the message and schedules a status report per
// destination when one was asked for.
func (c *Carrier) Submit(_ context.Context, conn *cmpp.Conn, id cmpp.MsgID, s *cmpp.Submit) uint32 {
	if s.RegisteredDelivery != 1 {
		return cmpp.ResultOK
	}
	submitted := time.Now()
	for _, dest := range s.DestTerminalIDs {
		delay, stat, smsc := c.pick()
		c.later(delay, func() {
			r := &cmpp.Report{MsgID: id, Stat: stat, SubmitTime: cmpp.ReportTime(submitted.In(c.cfg.Location)),
				DoneTime: cmpp.ReportTime(time.Now().In(c.cfg.Location)), DestTerminalID: dest, SMSCSequence: smsc}
			c.deliver(&cmpp.Deliver{DestID: s.SrcID, SrcTerminalID: dest, Report: r})
		})
	}
	return cmpp.ResultOK
}

func (c *Carrier) pick() (time.Duration, string, uint32) {
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
func (c *Carrier) later(d time.Duration, f func()) {
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
func (c *Carrier) deliver(d *cmpp.Deliver) error {
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
	switch {
	case errors.Is(err, cmpp.ErrConnClosed) || errors.Is(err, cmpp.ErrServerClosed):
		// The platform hung up (a stop, a restart): nothing is wrong on
		// the carrier's side, and the report is the platform's to query.
		c.cfg.Logger.Info("carrier: report not delivered: the platform's connection closed", "err", err)
	case err != nil:
		c.cfg.Logger.Warn("carrier: deliver", "err", err)
	}
	return err
}

// SendMO sends an MO message from phone to destID (an application's MO
// code plus extension), UCS2-encoded.
func (c *Carrier) SendMO(destID, phone, text string) error {
	ucs, err := cmpputils.Utf8ToUcs2(text)
	if err != nil {
		return err
	}
	return c.deliver(&cmpp.Deliver{DestID: destID, ServiceID: "demo", MsgFmt: cmpp.FmtUCS2, SrcTerminalID: phone, Content: []byte(ucs)})
}
