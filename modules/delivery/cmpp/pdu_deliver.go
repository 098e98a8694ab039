package cmpp

import "fmt"

// Deliver is CMPP_DELIVER, sent by the gateway for MO messages and status
// reports. With Report set it is a status report (Registered_Delivery 1,
// Msg_Content the encoded report); otherwise an MO message with Content
// in MsgFmt. SrcTerminalID is 21 bytes in 2.0 and 32 in 3.0;
// SrcTerminalType and LinkID exist only in 3.0, Reserve only in 2.0.
type Deliver struct {
	// MsgID is this DELIVER's own (outer) Msg_Id, which the DELIVER_RESP
	// echoes. Conn.Deliver allocates one when it is zero.
	MsgID           MsgID
	DestID          string // 21: service code or long number
	ServiceID       string // 10
	TPPID           uint8
	TPUDHI          uint8
	MsgFmt          uint8
	SrcTerminalID   string // MO: the handset; report: the original destination
	SrcTerminalType uint8  // 3.0
	Report          *Report
	Content         []byte // MO only
	Reserve         string // 2.0, 8
	LinkID          string // 3.0, 20
}

// Msg_Fmt values.
const (
	FmtASCII  uint8 = 0
	FmtWrite  uint8 = 3
	FmtBinary uint8 = 4
	FmtUCS2   uint8 = 8
	FmtGB     uint8 = 15
)

// Command implements PDU.
func (*Deliver) Command() CommandID { return CmdDeliver }

func (p *Deliver) encode(e *encoder, v Version) {
	e.onlyIn(V30, v, "Src_terminal_type", p.SrcTerminalType != 0)
	e.onlyIn(V30, v, "LinkID", p.LinkID != "")
	e.onlyIn(V20, v, "Reserved", p.Reserve != "")
	if p.Report != nil && len(p.Content) > 0 {
		e.fail(fmt.Errorf("%w: a DELIVER carries a report or content, not both", ErrMalformed))
	}
	if len(p.Content) > 255 {
		e.fail(fmt.Errorf("%w: content is %d bytes, Msg_Length holds 255", ErrMalformed, len(p.Content)))
	}
	e.u64(uint64(p.MsgID))
	e.str("Dest_Id", p.DestID, 21)
	e.str("Service_Id", p.ServiceID, 10)
	e.u8(p.TPPID)
	e.u8(p.TPUDHI)
	e.u8(p.MsgFmt)
	e.str("Src_terminal_Id", p.SrcTerminalID, v.terminalWidth())
	if v.Family() == V30 {
		e.u8(p.SrcTerminalType)
	}
	p.encodeContent(e, v)
	if v.Family() == V30 {
		e.str("LinkID", p.LinkID, 20)
	} else {
		e.str("Reserved", p.Reserve, 8)
	}
}

func (p *Deliver) encodeContent(e *encoder, v Version) {
	if p.Report == nil {
		e.u8(0)
		e.u8(uint8(len(p.Content)))
		e.raw(p.Content)
		return
	}
	layout := p.Report.layoutFor(v)
	e.u8(1)
	if layout == V30 {
		e.u8(ReportLen30)
	} else {
		e.u8(ReportLen20)
	}
	encodeReport(e, p.Report, layout)
}

func (p *Deliver) decode(d *decoder, v Version) {
	p.MsgID = MsgID(d.u64())
	p.DestID = d.str(21)
	p.ServiceID = d.str(10)
	p.TPPID = d.u8()
	p.TPUDHI = d.u8()
	p.MsgFmt = d.u8()
	p.SrcTerminalID = d.str(v.terminalWidth())
	if v.Family() == V30 {
		p.SrcTerminalType = d.u8()
	}
	registered := d.u8()
	content := d.bytes(int(d.u8()))
	if v.Family() == V30 {
		p.LinkID = d.str(20)
	} else {
		p.Reserve = d.str(8)
	}
	if d.err == nil {
		d.err = p.setContent(registered, content)
	}
}

func (p *Deliver) setContent(registered uint8, content []byte) error {
	switch registered {
	case 0:
		p.Content = content
		return nil
	case 1:
		r, err := DecodeReport(content)
		p.Report = r
		return err
	}
	return fmt.Errorf("%w: Registered_Delivery %d in DELIVER, want 0 or 1", ErrMalformed, registered)
}

// DeliverResp is CMPP_DELIVER_RESP, the SP's acknowledgement: MsgID echoes
// the DELIVER's outer Msg_Id; Result is 1 byte in 2.0, 4 in 3.0 (0 ok,
// 8 flow control, others errors).
type DeliverResp struct {
	MsgID  MsgID
	Result uint32
}

// Command implements PDU.
func (*DeliverResp) Command() CommandID { return CmdDeliverResp }

func (p *DeliverResp) encode(e *encoder, v Version) {
	e.u64(uint64(p.MsgID))
	e.result("Result", p.Result, v.resultWidth())
}

func (p *DeliverResp) decode(d *decoder, v Version) {
	p.MsgID = MsgID(d.u64())
	p.Result = d.result(v.resultWidth())
}
