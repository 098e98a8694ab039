package sim

import (
	"context"
	"fmt"
	"sync"
	"time"

	gocmpp "github.com/bigwhite/gocmpp"
	cmpputils "github.com/bigwhite/gocmpp/utils"

	"github.com/keelwork/keel/modules/delivery/cmpp"
	"github.com/keelwork/keel/modules/delivery/internal/cmppclient"
)

// Customer is a customer application connected over CMPP through
// gocmpp: the demo's clients and the tests' customers. It records every
// DELIVER with its receive time and answers as its policy says: ACK with a
// result, after a delay, echoing another Msg_Id, or not at all.
type Customer struct {
	s      *cmppclient.Session
	ver    gocmpp.Type
	policy func(d *Delivered) Ack

	mu     sync.Mutex
	got    []*Delivered
	feed   chan *Delivered // optional: every DELIVER as it arrives
	forget bool            // keep no history (long runs: the load benchmark)
}

// Delivered is one DELIVER as the customer received it.
type Delivered struct {
	At       time.Time
	Seq      uint32
	Outer    uint64 // the DELIVER's Msg_Id
	IsReport bool
	Inner    uint64 // report: the original submit's Msg_Id
	Stat     string
	Dest     string // report: Dest_terminal_Id; MO: Src_terminal_Id
	SMSCSeq  uint32
	Content  string // MO text
	Layout   int    // report length: 60 or 71
}

// Ack is how the customer answers one DELIVER.
type Ack struct {
	Result uint32
	Delay  time.Duration
	Silent bool
	Echo   uint64 // when set, the DELIVER_RESP echoes this Msg_Id instead
	// Until, when set, holds the DELIVER_RESP until it is closed (then
	// Delay): a test orders an answer after an event of its own instead of
	// guessing how long that event takes on a loaded machine.
	Until <-chan struct{}
}

func AckOK(*Delivered) Ack { return Ack{} }

// DialCustomer connects as account with secret; feed may be nil.
func DialCustomer(addr, account, secret string, ver gocmpp.Type, policy func(*Delivered) Ack, feed chan *Delivered) (*Customer, error) {
	return dial(&Customer{ver: ver, policy: policy, feed: feed}, addr, account, secret)
}

// DialQuietCustomer is a customer that keeps no history of what it got.
func DialQuietCustomer(addr, account, secret string, ver gocmpp.Type, policy func(*Delivered) Ack) (*Customer, error) {
	return dial(&Customer{ver: ver, policy: policy, forget: true}, addr, account, secret)
}

func dial(c *Customer, addr, account, secret string) (*Customer, error) {
	if c.policy == nil {
		c.policy = AckOK
	}
	s, err := cmppclient.Dial(addr, account, secret, c.ver, 5*time.Second, c.handle)
	if err != nil {
		return nil, err
	}
	c.s = s
	return c, nil
}

func (c *Customer) handle(s *cmppclient.Session, pkt any) {
	d, seq, ok := c.decode(pkt)
	if !ok {
		return
	}
	if !c.forget {
		c.mu.Lock()
		c.got = append(c.got, d)
		c.mu.Unlock()
	}
	if c.feed != nil {
		c.feed <- d
	}
	a := c.policy(d)
	if a.Silent {
		return
	}
	echo := d.Outer
	if a.Echo != 0 {
		echo = a.Echo
	}
	var resp gocmpp.Packer = &gocmpp.Cmpp3DeliverRspPkt{MsgId: echo, Result: a.Result}
	if c.ver != gocmpp.V30 {
		resp = &gocmpp.Cmpp2DeliverRspPkt{MsgId: echo, Result: uint8(a.Result)}
	}
	if a.Until != nil {
		go func() {
			<-a.Until
			time.Sleep(a.Delay)
			s.Respond(resp, seq)
		}()
		return
	}
	if a.Delay > 0 {
		time.AfterFunc(a.Delay, func() { s.Respond(resp, seq) })
		return
	}
	s.Respond(resp, seq)
}

// decode reads a DELIVER of either version; 3.0 reports are parsed with
// this module's decoder, because gocmpp reads every report in the 60-byte
// layout.
func (c *Customer) decode(pkt any) (*Delivered, uint32, bool) {
	d := &Delivered{At: time.Now()}
	var content string
	var reg, fmtByte uint8
	switch p := pkt.(type) {
	case *gocmpp.Cmpp2DeliverReqPkt:
		d.Seq, d.Outer, d.Dest, reg, content, fmtByte = p.SeqId, p.MsgId, p.SrcTerminalId, p.RegisterDelivery, p.MsgContent, p.MsgFmt
	case *gocmpp.Cmpp3DeliverReqPkt:
		d.Seq, d.Outer, d.Dest, reg, content, fmtByte = p.SeqId, p.MsgId, p.SrcTerminalId, p.RegisterDelivery, p.MsgContent, p.MsgFmt
	default:
		return nil, 0, false
	}
	if reg == 0 {
		d.Content = content
		if fmtByte == cmpp.FmtUCS2 {
			if txt, err := cmpputils.Ucs2ToUtf8(content); err == nil {
				d.Content = txt
			}
		}
		return d, d.Seq, true
	}
	d.IsReport, d.Layout = true, len(content)
	if len(content) == cmpp.ReportLen20 {
		var r gocmpp.CmppReceiptPkt
		if err := r.Unpack([]byte(content)); err == nil {
			d.Inner, d.Stat, d.Dest, d.SMSCSeq = r.MsgId, r.Stat, r.DestTerminalId, r.SmscSequence
		}
	} else if r, err := cmpp.DecodeReport([]byte(content)); err == nil {
		d.Inner, d.Stat, d.Dest, d.SMSCSeq = uint64(r.MsgID), r.Stat, r.DestTerminalID, r.SMSCSequence
	}
	return d, d.Seq, true
}

// Submit sends one message (status report wanted) and returns the
// gateway's Msg_Id.
func (c *Customer) Submit(ctx context.Context, srcID, phone, text string) (uint64, error) {
	ucs, err := cmpputils.Utf8ToUcs2(text)
	if err != nil {
		return 0, err
	}
	var pkt gocmpp.Packer
	if c.ver == gocmpp.V30 {
		pkt = &gocmpp.Cmpp3SubmitReqPkt{PkTotal: 1, PkNumber: 1, RegisteredDelivery: 1, MsgLevel: 1, ServiceId: "demo",
			FeeUserType: 2, MsgFmt: 8, MsgSrc: "demo", FeeType: "01", SrcId: srcID, DestUsrTl: 1,
			DestTerminalId: []string{phone}, MsgLength: uint8(len(ucs)), MsgContent: ucs}
	} else {
		pkt = &gocmpp.Cmpp2SubmitReqPkt{PkTotal: 1, PkNumber: 1, RegisteredDelivery: 1, MsgLevel: 1, ServiceId: "demo",
			FeeUserType: 2, MsgFmt: 8, MsgSrc: "demo", FeeType: "01", SrcId: srcID, DestUsrTl: 1,
			DestTerminalId: []string{phone}, MsgLength: uint8(len(ucs)), MsgContent: ucs}
	}
	resp, err := c.s.Request(ctx, pkt)
	if err != nil {
		return 0, err
	}
	switch r := resp.(type) {
	case *gocmpp.Cmpp3SubmitRspPkt:
		return r.MsgId, resultErr(r.Result)
	case *gocmpp.Cmpp2SubmitRspPkt:
		return r.MsgId, resultErr(uint32(r.Result))
	}
	return 0, fmt.Errorf("unexpected response %T to SUBMIT", resp)
}

func resultErr(r uint32) error {
	if r != 0 {
		return fmt.Errorf("SUBMIT_RESP result %d", r)
	}
	return nil
}

// Received returns a copy of every DELIVER so far.
func (c *Customer) Received() []*Delivered {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Delivered(nil), c.got...)
}

// Close ends the connection with TERMINATE.
func (c *Customer) Close() error { return c.s.Close(5 * time.Second) }

// Done is closed when the connection ended.
func (c *Customer) Done() <-chan struct{} { return c.s.Done() }

// Version is the CMPP version the customer speaks.
func (c *Customer) Version() gocmpp.Type { return c.ver }

// Respond sends pkt as the response to the request with sequence id seq:
// a test answering a DELIVER by hand, past the policy.
func (c *Customer) Respond(pkt gocmpp.Packer, seq uint32) { c.s.Respond(pkt, seq) }
