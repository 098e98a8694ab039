package smpp

// Unbind (no body): the sender ends the session.
type Unbind struct{}

// Command implements PDU.
func (*Unbind) Command() CommandID { return CmdUnbind }
func (*Unbind) encode(*encoder)    {}
func (*Unbind) decode(*decoder)    {}

// UnbindResp (no body) answers Unbind.
type UnbindResp struct{ Status uint32 }

// Command implements PDU.
func (*UnbindResp) Command() CommandID   { return CmdUnbindResp }
func (p *UnbindResp) status() uint32     { return p.Status }
func (p *UnbindResp) setStatus(s uint32) { p.Status = s }
func (*UnbindResp) encode(*encoder)      {}
func (*UnbindResp) decode(*decoder)      {}

// EnquireLink (no body) is the link check either side may send.
type EnquireLink struct{}

// Command implements PDU.
func (*EnquireLink) Command() CommandID { return CmdEnquireLink }
func (*EnquireLink) encode(*encoder)    {}
func (*EnquireLink) decode(*decoder)    {}

// EnquireLinkResp (no body) answers EnquireLink.
type EnquireLinkResp struct{ Status uint32 }

// Command implements PDU.
func (*EnquireLinkResp) Command() CommandID   { return CmdEnquireLinkResp }
func (p *EnquireLinkResp) status() uint32     { return p.Status }
func (p *EnquireLinkResp) setStatus(s uint32) { p.Status = s }
func (*EnquireLinkResp) encode(*encoder)      {}
func (*EnquireLinkResp) decode(*decoder)      {}

// GenericNack (no body) answers a PDU whose header could not be used: an
// unknown command_id or a bad command_length. Its sequence_number is the
// offending PDU's.
type GenericNack struct{ Status uint32 }

// Command implements PDU.
func (*GenericNack) Command() CommandID   { return CmdGenericNack }
func (p *GenericNack) status() uint32     { return p.Status }
func (p *GenericNack) setStatus(s uint32) { p.Status = s }
func (*GenericNack) encode(*encoder)      {}
func (*GenericNack) decode(*decoder)      {}
