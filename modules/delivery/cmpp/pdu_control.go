package cmpp

// ActiveTest is CMPP_ACTIVE_TEST (no body), the link check either side
// may send.
type ActiveTest struct{}

// Command implements PDU.
func (*ActiveTest) Command() CommandID { return CmdActiveTest }

func (*ActiveTest) encode(*encoder, Version) {}
func (*ActiveTest) decode(*decoder, Version) {}

// ActiveTestResp is CMPP_ACTIVE_TEST_RESP with its one reserved byte.
type ActiveTestResp struct {
	Reserved uint8
}

// Command implements PDU.
func (*ActiveTestResp) Command() CommandID { return CmdActiveTestResp }

func (p *ActiveTestResp) encode(e *encoder, _ Version) { e.u8(p.Reserved) }
func (p *ActiveTestResp) decode(d *decoder, _ Version) { p.Reserved = d.u8() }

// Terminate is CMPP_TERMINATE (no body): the sender ends the session.
type Terminate struct{}

// Command implements PDU.
func (*Terminate) Command() CommandID { return CmdTerminate }

func (*Terminate) encode(*encoder, Version) {}
func (*Terminate) decode(*decoder, Version) {}

// TerminateResp is CMPP_TERMINATE_RESP (no body).
type TerminateResp struct{}

// Command implements PDU.
func (*TerminateResp) Command() CommandID { return CmdTerminateResp }

func (*TerminateResp) encode(*encoder, Version) {}
func (*TerminateResp) decode(*decoder, Version) {}
