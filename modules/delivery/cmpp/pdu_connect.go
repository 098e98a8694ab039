package cmpp

// CONNECT_RESP Status values (the same numbers in 2.0 and 3.0).
const (
	StatusOK              uint32 = 0
	StatusBadStructure    uint32 = 1
	StatusBadSourceAddr   uint32 = 2
	StatusAuthFailed      uint32 = 3
	StatusVersionTooHigh  uint32 = 4
	StatusOtherConnectErr uint32 = 5
)

// Connect is CMPP_CONNECT, 27 bytes in both versions. Timestamp is the
// MMDDHHMMSS clock reading as a decimal number; the MD5 covers it as a
// 10-digit string.
type Connect struct {
	SourceAddr          string // 6 bytes
	AuthenticatorSource [16]byte
	Version             Version
	Timestamp           uint32
}

// Command implements PDU.
func (*Connect) Command() CommandID { return CmdConnect }

func (p *Connect) encode(e *encoder, _ Version) {
	e.str("Source_Addr", p.SourceAddr, 6)
	e.raw(p.AuthenticatorSource[:])
	e.u8(uint8(p.Version))
	e.u32(p.Timestamp)
}

func (p *Connect) decode(d *decoder, _ Version) {
	p.SourceAddr = d.str(6)
	copy(p.AuthenticatorSource[:], d.take(16))
	p.Version = Version(d.u8())
	p.Timestamp = d.u32()
}

// ConnectResp is CMPP_CONNECT_RESP: Status is 1 byte in 2.0 and 4 bytes
// in 3.0.
type ConnectResp struct {
	Status            uint32
	AuthenticatorISMG [16]byte
	Version           Version
}

// Command implements PDU.
func (*ConnectResp) Command() CommandID { return CmdConnectResp }

func (p *ConnectResp) encode(e *encoder, v Version) {
	e.result("Status", p.Status, v.resultWidth())
	e.raw(p.AuthenticatorISMG[:])
	e.u8(uint8(p.Version))
}

func (p *ConnectResp) decode(d *decoder, v Version) {
	p.Status = d.result(v.resultWidth())
	copy(p.AuthenticatorISMG[:], d.take(16))
	p.Version = Version(d.u8())
}
