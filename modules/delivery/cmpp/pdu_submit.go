package cmpp

import "fmt"

// Fixed part of a SUBMIT body (everything but the destination numbers and
// the message content).
const (
	submitFixed20 = 126
	submitFixed30 = 151
	maxDestUsers  = 100 // DestUsr_tl limit in both specs
)

// SUBMIT_RESP Result values. 9 to 13 exist only in 3.0.
const (
	ResultOK              uint32 = 0
	ResultBadStructure    uint32 = 1
	ResultBadCommand      uint32 = 2
	ResultDuplicateSeq    uint32 = 3
	ResultBadLength       uint32 = 4
	ResultBadFeeCode      uint32 = 5
	ResultTooLong         uint32 = 6
	ResultBadServiceID    uint32 = 7
	ResultFlowControl     uint32 = 8
	ResultOther           uint32 = 9
	ResultBadSrcID        uint32 = 10
	ResultBadMsgSrc       uint32 = 11
	ResultBadFeeTerminal  uint32 = 12
	ResultBadDestTerminal uint32 = 13
)

// Submit is CMPP_SUBMIT. Terminal numbers are 21 bytes in 2.0 and 32 in
// 3.0; FeeTerminalType, DestTerminalType and LinkID exist only in 3.0,
// Reserve only in 2.0 (encoding a field the version lacks is an error).
// Msg_Length and DestUsr_tl are derived from Content and DestTerminalIDs.
type Submit struct {
	MsgID              MsgID // left empty by the SP; the ISMG assigns one
	PkTotal            uint8
	PkNumber           uint8
	RegisteredDelivery uint8 // 1: the SP wants a status report
	MsgLevel           uint8
	ServiceID          string // 10
	FeeUserType        uint8
	FeeTerminalID      string
	FeeTerminalType    uint8 // 3.0
	TPPID              uint8
	TPUDHI             uint8
	MsgFmt             uint8
	MsgSrc             string // 6
	FeeType            string // 2
	FeeCode            string // 6
	ValidTime          string // 17
	AtTime             string // 17
	SrcID              string // 21
	DestTerminalIDs    []string
	DestTerminalType   uint8 // 3.0
	Content            []byte
	Reserve            string // 2.0, 8
	LinkID             string // 3.0, 20
}

// Command implements PDU.
func (*Submit) Command() CommandID { return CmdSubmit }

func (p *Submit) encode(e *encoder, v Version) {
	e.onlyIn(V30, v, "Fee_terminal_type", p.FeeTerminalType != 0)
	e.onlyIn(V30, v, "Dest_terminal_type", p.DestTerminalType != 0)
	e.onlyIn(V30, v, "LinkID", p.LinkID != "")
	e.onlyIn(V20, v, "Reserve", p.Reserve != "")
	if len(p.DestTerminalIDs) > maxDestUsers {
		e.fail(fmt.Errorf("%w: %d destinations, at most %d", ErrMalformed, len(p.DestTerminalIDs), maxDestUsers))
	}
	if len(p.Content) > 255 {
		e.fail(fmt.Errorf("%w: content is %d bytes, Msg_Length holds 255", ErrMalformed, len(p.Content)))
	}
	p.encodeHead(e, v)
	p.encodeTail(e, v)
}

func (p *Submit) encodeHead(e *encoder, v Version) {
	e.u64(uint64(p.MsgID))
	e.u8(p.PkTotal)
	e.u8(p.PkNumber)
	e.u8(p.RegisteredDelivery)
	e.u8(p.MsgLevel)
	e.str("Service_Id", p.ServiceID, 10)
	e.u8(p.FeeUserType)
	e.str("Fee_terminal_Id", p.FeeTerminalID, v.terminalWidth())
	if v.Family() == V30 {
		e.u8(p.FeeTerminalType)
	}
	e.u8(p.TPPID)
	e.u8(p.TPUDHI)
	e.u8(p.MsgFmt)
	e.str("Msg_src", p.MsgSrc, 6)
	e.str("FeeType", p.FeeType, 2)
	e.str("FeeCode", p.FeeCode, 6)
	e.str("ValId_Time", p.ValidTime, 17)
	e.str("At_Time", p.AtTime, 17)
	e.str("Src_Id", p.SrcID, 21)
}

func (p *Submit) encodeTail(e *encoder, v Version) {
	e.u8(uint8(len(p.DestTerminalIDs)))
	for _, d := range p.DestTerminalIDs {
		e.str("Dest_terminal_Id", d, v.terminalWidth())
	}
	if v.Family() == V30 {
		e.u8(p.DestTerminalType)
	}
	e.u8(uint8(len(p.Content)))
	e.raw(p.Content)
	if v.Family() == V30 {
		e.str("LinkID", p.LinkID, 20)
	} else {
		e.str("Reserve", p.Reserve, 8)
	}
}

func (p *Submit) decode(d *decoder, v Version) {
	p.decodeHead(d, v)
	n := int(d.u8())
	if n > maxDestUsers && d.err == nil {
		d.err = fmt.Errorf("%w: DestUsr_tl %d, at most %d", ErrMalformed, n, maxDestUsers)
		return
	}
	for range n {
		p.DestTerminalIDs = append(p.DestTerminalIDs, d.str(v.terminalWidth()))
	}
	if v.Family() == V30 {
		p.DestTerminalType = d.u8()
	}
	p.Content = d.bytes(int(d.u8()))
	if v.Family() == V30 {
		p.LinkID = d.str(20)
	} else {
		p.Reserve = d.str(8)
	}
}

func (p *Submit) decodeHead(d *decoder, v Version) {
	p.MsgID = MsgID(d.u64())
	p.PkTotal = d.u8()
	p.PkNumber = d.u8()
	p.RegisteredDelivery = d.u8()
	p.MsgLevel = d.u8()
	p.ServiceID = d.str(10)
	p.FeeUserType = d.u8()
	p.FeeTerminalID = d.str(v.terminalWidth())
	if v.Family() == V30 {
		p.FeeTerminalType = d.u8()
	}
	p.TPPID = d.u8()
	p.TPUDHI = d.u8()
	p.MsgFmt = d.u8()
	p.MsgSrc = d.str(6)
	p.FeeType = d.str(2)
	p.FeeCode = d.str(6)
	p.ValidTime = d.str(17)
	p.AtTime = d.str(17)
	p.SrcID = d.str(21)
}

// SubmitResp is CMPP_SUBMIT_RESP: Result is 1 byte in 2.0, 4 in 3.0.
type SubmitResp struct {
	MsgID  MsgID
	Result uint32
}

// Command implements PDU.
func (*SubmitResp) Command() CommandID { return CmdSubmitResp }

func (p *SubmitResp) encode(e *encoder, v Version) {
	e.u64(uint64(p.MsgID))
	e.result("Result", p.Result, v.resultWidth())
}

func (p *SubmitResp) decode(d *decoder, v Version) {
	p.MsgID = MsgID(d.u64())
	p.Result = d.result(v.resultWidth())
}
