// Package carrierlink is the delivery platform's link to its carrier: a
// CMPP 3.0 client connection (through gocmpp) that forwards customers'
// submits upstream and receives the carrier's status reports and MO
// messages. What a report or an MO becomes is not its business: it hands
// each to the handlers it was given and acknowledges the DELIVER only once
// they returned, so a message the platform could not store is sent again
// by the carrier.
package carrierlink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	gocmpp "github.com/bigwhite/gocmpp"

	"github.com/keelwork/keel/modules/delivery/cmpp"
	"github.com/keelwork/keel/modules/delivery/internal/cmppclient"
)

// ErrDown: the link is not connected now; a submit can be tried again
// later.
var ErrDown = errors.New("carrierlink: the carrier link is down")

// MO is an MO message as the carrier delivered it.
type MO struct {
	UpstreamID string // the carrier's Msg_Id
	DestID     string // the number the subscriber sent to: an application's MO code and extension
	ServiceID  string
	MsgFmt     uint8
	Content    []byte
	Phone      string // the subscriber
}

// Message is one submit to forward to the carrier.
type Message struct {
	ServiceID string
	MsgFmt    uint8
	SrcID     string
	Phones    []string
	Content   []byte
}

// Config configures a Link.
type Config struct {
	Addr, Account, Secret string
	// Report and MO store what the carrier delivered; an error makes the
	// link answer result 9, and the carrier sends it again.
	Report func(ctx context.Context, r *cmpp.Report) error
	MO     func(ctx context.Context, mo *MO) error
	Logger *slog.Logger
}

// Link keeps one connection to the carrier up while Run runs.
type Link struct {
	cfg       Config
	mu        sync.Mutex
	s         *cmppclient.Session
	ingestCtx context.Context
}

// New returns a link that connects when Run is called.
func New(cfg Config) *Link {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Link{cfg: cfg}
}

// Run keeps the link up until ctx ends, reconnecting with a backoff.
func (l *Link) Run(ctx context.Context) {
	l.ingestCtx = ctx
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		s, err := cmppclient.Dial(l.cfg.Addr, l.cfg.Account, l.cfg.Secret, gocmpp.V30, 5*time.Second, l.handle)
		if err != nil {
			l.cfg.Logger.Warn("delivery: carrier link", "addr", l.cfg.Addr, "err", err)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 200 * time.Millisecond
		l.set(s)
		select {
		case <-s.Done():
		case <-ctx.Done():
			_ = s.Close(5 * time.Second)
		}
		l.set(nil)
	}
}

// Connected reports whether the link is up now.
func (l *Link) Connected() bool { return l.session() != nil }

func (l *Link) set(s *cmppclient.Session) {
	l.mu.Lock()
	l.s = s
	l.mu.Unlock()
}

func (l *Link) session() *cmppclient.Session {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s
}

// handle stores the carrier's DELIVERs on the reader goroutine, then
// acknowledges each (result 9 when it could not be stored, so the carrier
// sends it again).
func (l *Link) handle(s *cmppclient.Session, pkt any) {
	p, ok := pkt.(*gocmpp.Cmpp3DeliverReqPkt)
	if !ok {
		return
	}
	var result uint32
	if err := l.ingest(l.ingestCtx, p); err != nil {
		// At a stop the carrier is told to send it again (result 9): not
		// an error of anyone's.
		if l.ingestCtx.Err() != nil {
			l.cfg.Logger.Info("delivery: stopping; the carrier will resend a DELIVER", "msg_id", p.MsgId)
		} else {
			l.cfg.Logger.Error("delivery: ingesting a carrier DELIVER", "msg_id", p.MsgId, "err", err)
		}
		result = cmpp.ResultOther
	}
	s.Respond(&gocmpp.Cmpp3DeliverRspPkt{MsgId: p.MsgId, Result: result}, p.SeqId)
}

func (l *Link) ingest(ctx context.Context, p *gocmpp.Cmpp3DeliverReqPkt) error {
	if p.RegisterDelivery == 0 {
		return l.cfg.MO(ctx, &MO{UpstreamID: strconv.FormatUint(p.MsgId, 10), DestID: p.DestId, ServiceID: p.ServiceId,
			MsgFmt: p.MsgFmt, Content: []byte(p.MsgContent), Phone: p.SrcTerminalId})
	}
	r, err := cmpp.DecodeReport([]byte(p.MsgContent))
	if err != nil {
		return err
	}
	return l.cfg.Report(ctx, r)
}

// Submit forwards one message and returns the carrier's Msg_Id; ErrDown
// when the link is not connected.
func (l *Link) Submit(ctx context.Context, msg *Message) (string, error) {
	s := l.session()
	if s == nil {
		return "", ErrDown
	}
	pkt := &gocmpp.Cmpp3SubmitReqPkt{PkTotal: 1, PkNumber: 1, RegisteredDelivery: 1, MsgLevel: 1,
		ServiceId: msg.ServiceID, FeeUserType: 2, MsgFmt: msg.MsgFmt, MsgSrc: "keel", FeeType: "01",
		SrcId: msg.SrcID, DestUsrTl: uint8(len(msg.Phones)), DestTerminalId: msg.Phones,
		MsgLength: uint8(len(msg.Content)), MsgContent: string(msg.Content)}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := s.Request(ctx, pkt)
	if err != nil {
		return "", err
	}
	r, ok := resp.(*gocmpp.Cmpp3SubmitRspPkt)
	if !ok {
		return "", fmt.Errorf("carrier answered SUBMIT with %T", resp)
	}
	if r.Result != 0 {
		return "", fmt.Errorf("carrier refused the submit: result %d", r.Result)
	}
	return strconv.FormatUint(r.MsgId, 10), nil
}
