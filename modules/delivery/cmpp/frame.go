package cmpp

import (
	"encoding/binary"
	"fmt"
	"io"
)

// HeaderLen is the size of the PDU header: Total_Length, Command_Id and
// Sequence_Id, four bytes each.
const HeaderLen = 12

// Header is the fixed start of every PDU. Length counts the header too.
type Header struct {
	Length  uint32
	Command CommandID
	Seq     uint32
}

// PDU is one decoded message body. The concrete types are the pointer
// types in this package (*Connect, *Submit, *Deliver, ...).
type PDU interface {
	Command() CommandID
	encode(e *encoder, v Version)
	decode(d *decoder, v Version)
}

// The largest legal PDU of each version is a SUBMIT to 100 numbers with a
// 255-byte message: 12 + 126 + 100*21 + 255 on 2.0 and 12 + 151 + 100*32 +
// 255 on 3.0.
const (
	maxPDU20 = HeaderLen + submitFixed20 + maxDestUsers*21 + 255
	maxPDU30 = HeaderLen + submitFixed30 + maxDestUsers*32 + 255
)

// MaxPDUSize is the largest Total_Length accepted for the version; 0 for
// an unsupported version.
func MaxPDUSize(v Version) int {
	switch v.Family() {
	case V20:
		return maxPDU20
	case V30:
		return maxPDU30
	}
	return 0
}

func newPDU(c CommandID) PDU {
	switch c {
	case CmdConnect:
		return &Connect{}
	case CmdConnectResp:
		return &ConnectResp{}
	case CmdSubmit:
		return &Submit{}
	case CmdSubmitResp:
		return &SubmitResp{}
	case CmdDeliver:
		return &Deliver{}
	case CmdDeliverResp:
		return &DeliverResp{}
	case CmdActiveTest:
		return &ActiveTest{}
	case CmdActiveTestResp:
		return &ActiveTestResp{}
	case CmdTerminate:
		return &Terminate{}
	case CmdTerminateResp:
		return &TerminateResp{}
	}
	return nil
}

// ParseHeader reads the header at the start of frame without checking
// the body.
func ParseHeader(frame []byte) (Header, error) {
	if len(frame) < HeaderLen {
		return Header{}, fmt.Errorf("%w: %d bytes, header needs %d", ErrLength, len(frame), HeaderLen)
	}
	return Header{
		Length:  binary.BigEndian.Uint32(frame[0:4]),
		Command: CommandID(binary.BigEndian.Uint32(frame[4:8])),
		Seq:     binary.BigEndian.Uint32(frame[8:12]),
	}, nil
}

// Decode parses one whole PDU (header and body) in the layout of version
// v. Total_Length must equal len(frame) and every field must be present
// with nothing left over. It never panics on any input.
func Decode(v Version, frame []byte) (Header, PDU, error) {
	if !v.Supported() {
		return Header{}, nil, fmt.Errorf("%w: %#x", ErrUnsupportedVersion, uint8(v))
	}
	h, err := ParseHeader(frame)
	if err != nil {
		return h, nil, err
	}
	if err := checkLength(v, h.Length, len(frame)); err != nil {
		return h, nil, err
	}
	p := newPDU(h.Command)
	if p == nil {
		return h, nil, fmt.Errorf("%w: %s", ErrUnknownCommand, h.Command)
	}
	d := &decoder{b: frame[HeaderLen:]}
	p.decode(d, v)
	if err := d.finish(); err != nil {
		return h, nil, fmt.Errorf("decoding %s: %w", h.Command, err)
	}
	return h, p, nil
}

func checkLength(v Version, total uint32, have int) error {
	if total > uint32(MaxPDUSize(v)) {
		return fmt.Errorf("%w: Total_Length %d, CMPP %s allows %d", ErrTooLarge, total, v, MaxPDUSize(v))
	}
	if total != uint32(have) {
		return fmt.Errorf("%w: Total_Length %d, frame has %d bytes", ErrLength, total, have)
	}
	return nil
}

// Encode builds the wire form of p in the layout of version v with the
// given Sequence_Id.
func Encode(v Version, seq uint32, p PDU) ([]byte, error) {
	if !v.Supported() {
		return nil, fmt.Errorf("%w: %#x", ErrUnsupportedVersion, uint8(v))
	}
	e := &encoder{b: make([]byte, HeaderLen, 64)}
	p.encode(e, v)
	if e.err != nil {
		return nil, fmt.Errorf("encoding %s: %w", p.Command(), e.err)
	}
	if len(e.b) > MaxPDUSize(v) {
		return nil, fmt.Errorf("encoding %s: %w: %d bytes", p.Command(), ErrTooLarge, len(e.b))
	}
	binary.BigEndian.PutUint32(e.b[0:4], uint32(len(e.b)))
	binary.BigEndian.PutUint32(e.b[4:8], uint32(p.Command()))
	binary.BigEndian.PutUint32(e.b[8:12], seq)
	return e.b, nil
}

// ReadFrame reads one PDU from r. It checks Total_Length against
// [HeaderLen, max] before allocating, so a hostile length cannot make it
// allocate more than max bytes.
func ReadFrame(r io.Reader, max int) ([]byte, error) {
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(lb[:])
	if n < HeaderLen {
		return nil, fmt.Errorf("%w: Total_Length %d is shorter than the header", ErrLength, n)
	}
	if n > uint32(max) {
		return nil, fmt.Errorf("%w: Total_Length %d, limit %d", ErrTooLarge, n, max)
	}
	frame := make([]byte, n)
	copy(frame, lb[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		return nil, fmt.Errorf("reading %d-byte pdu: %w", n, err)
	}
	return frame, nil
}
