package smpp

// BindType is how an ESME binds: as a transmitter (it submits), a
// receiver (it receives deliver_sm) or a transceiver (both).
type BindType uint8

// The three bind types.
const (
	BindTransmitter BindType = iota + 1
	BindReceiver
	BindTransceiver
)

// InterfaceVersion34 is the interface_version of SMPP 3.4. ESMEs binding
// with a lower version must not be sent TLVs.
const InterfaceVersion34 uint8 = 0x34

func bindTypeOf(c CommandID) BindType {
	switch c {
	case CmdBindTransmitter:
		return BindTransmitter
	case CmdBindReceiver:
		return BindReceiver
	case CmdBindTransceiver:
		return BindTransceiver
	}
	return 0
}

// request is the bind command of t; 0 for an invalid type.
func (t BindType) request() CommandID {
	switch t {
	case BindTransmitter:
		return CmdBindTransmitter
	case BindReceiver:
		return CmdBindReceiver
	case BindTransceiver:
		return CmdBindTransceiver
	}
	return 0
}

// Receives reports whether the bind may be sent deliver_sm.
func (t BindType) Receives() bool { return t == BindReceiver || t == BindTransceiver }

// Transmits reports whether the bind may send submit_sm.
func (t BindType) Transmits() bool { return t == BindTransmitter || t == BindTransceiver }

func (t BindType) String() string {
	switch t {
	case BindTransmitter:
		return "transmitter"
	case BindReceiver:
		return "receiver"
	case BindTransceiver:
		return "transceiver"
	}
	return "invalid"
}

// Bind is bind_transmitter, bind_receiver or bind_transceiver, by Type.
// C-Octet String limits (NUL included): system_id 16, password 9,
// system_type 13, address_range 41.
type Bind struct {
	Type             BindType
	SystemID         string
	Password         string
	SystemType       string
	InterfaceVersion uint8
	AddrTON          uint8
	AddrNPI          uint8
	AddressRange     string
}

// Command implements PDU.
func (p *Bind) Command() CommandID { return p.Type.request() }

func (p *Bind) encode(e *encoder) {
	if p.Type.request() == 0 {
		e.failf("bind type %d", p.Type)
	}
	e.cstr("system_id", p.SystemID, 16)
	e.cstr("password", p.Password, 9)
	e.cstr("system_type", p.SystemType, 13)
	e.u8(p.InterfaceVersion)
	e.u8(p.AddrTON)
	e.u8(p.AddrNPI)
	e.cstr("address_range", p.AddressRange, 41)
}

func (p *Bind) decode(d *decoder) {
	p.SystemID = d.cstr("system_id", StatusInvSysID, 16)
	p.Password = d.cstr("password", StatusInvPaswd, 9)
	p.SystemType = d.cstr("system_type", StatusInvSysTyp, 13)
	p.InterfaceVersion = d.u8("interface_version")
	p.AddrTON = d.u8("addr_ton")
	p.AddrNPI = d.u8("addr_npi")
	p.AddressRange = d.cstr("address_range", StatusBindFail, 41)
}

// BindResp answers a Bind of the same Type. SystemID (at most 15 bytes)
// names the SMSC; TLVs may carry sc_interface_version. A failed bind
// with an empty SystemID carries no body, as SMPP 3.4 intends for error
// responses.
type BindResp struct {
	Type     BindType
	Status   uint32
	SystemID string
	TLVs     TLVs
	body     bodyForm
}

// Command implements PDU.
func (p *BindResp) Command() CommandID { return p.Type.request().Response() }

func (p *BindResp) status() uint32     { return p.Status }
func (p *BindResp) setStatus(s uint32) { p.Status = s }

func (p *BindResp) encode(e *encoder) {
	if p.Type.request() == 0 {
		e.failf("bind type %d", p.Type)
	}
	if !p.body.present(p.Status, p.SystemID) {
		if len(p.TLVs) > 0 {
			e.failf("a bind_resp without body cannot carry TLVs")
		}
		return
	}
	e.cstr("system_id", p.SystemID, 16)
	e.tlvs(p.TLVs)
}

func (p *BindResp) decode(d *decoder) {
	if d.left() == 0 {
		p.body = p.body.decoded(false, p.Status, "")
		return
	}
	p.SystemID = d.cstr("system_id", StatusInvSysID, 16)
	p.body = p.body.decoded(true, p.Status, p.SystemID)
	p.TLVs = d.tlvs()
}
