package smpp

import (
	"encoding/binary"
	"fmt"
	"io"
)

// HeaderLen is the size of the PDU header: command_length, command_id,
// command_status and sequence_number, four bytes each.
const HeaderLen = 16

// MaxPDUSize is the largest command_length accepted or produced: 64 KiB,
// room for a message_payload of most of that size. SMPP 3.4 sets no
// limit; common ESME libraries refuse larger PDUs, so sending one would
// only break the session.
const MaxPDUSize = 64 << 10

// Header is the fixed start of every PDU. Length counts the header too.
type Header struct {
	Length  uint32
	Command CommandID
	Status  uint32
	Seq     uint32
}

// PDU is one decoded message body. The concrete types are the pointer
// types in this package (*Bind, *SubmitSM, *DeliverSM, ...). Responses
// carry their command_status in a Status field.
type PDU interface {
	Command() CommandID
	encode(e *encoder)
	decode(d *decoder)
}

// response is implemented by response PDUs, whose header carries a
// command_status; requests always send 0.
type response interface {
	PDU
	status() uint32
	setStatus(uint32)
}

// ParseHeader reads the header at the start of frame without checking
// the body.
func ParseHeader(frame []byte) (Header, error) {
	if len(frame) < HeaderLen {
		return Header{}, &DecodeError{Field: "header", Status: StatusInvCmdLen,
			Err: fmt.Errorf("%w: %d bytes, the header needs %d", ErrLength, len(frame), HeaderLen)}
	}
	return Header{
		Length:  binary.BigEndian.Uint32(frame[0:4]),
		Command: CommandID(binary.BigEndian.Uint32(frame[4:8])),
		Status:  binary.BigEndian.Uint32(frame[8:12]),
		Seq:     binary.BigEndian.Uint32(frame[12:16]),
	}, nil
}

// Decode parses one whole PDU. command_length must equal len(frame) and
// every field must be present and within its limit, with nothing left
// over. Errors after the header are *DecodeError values. It never panics.
func Decode(frame []byte) (Header, PDU, error) {
	h, err := ParseHeader(frame)
	if err != nil {
		return h, nil, err
	}
	if err := checkLength(h, len(frame)); err != nil {
		return h, nil, err
	}
	p := newPDU(h.Command)
	if p == nil {
		return h, nil, &DecodeError{Command: h.Command, Field: "command_id", Status: StatusInvCmdID, Err: ErrUnknownCommand}
	}
	if r, ok := p.(response); ok {
		r.setStatus(h.Status)
	} else if h.Status != 0 {
		return h, nil, &DecodeError{Command: h.Command, Field: "command_status", Status: StatusUnknownErr,
			Err: fmt.Errorf("%w: a request with command_status %#x", ErrMalformed, h.Status)}
	}
	d := &decoder{b: frame[HeaderLen:], cmd: h.Command}
	p.decode(d)
	if err := d.finish(); err != nil {
		return h, nil, err
	}
	return h, p, nil
}

func checkLength(h Header, have int) error {
	de := &DecodeError{Command: h.Command, Field: "command_length", Status: StatusInvCmdLen}
	switch {
	case h.Length > MaxPDUSize:
		de.Err = fmt.Errorf("%w: command_length %d, limit %d", ErrTooLarge, h.Length, MaxPDUSize)
	case h.Length != uint32(have):
		de.Err = fmt.Errorf("%w: command_length %d, frame has %d bytes", ErrLength, h.Length, have)
	default:
		return nil
	}
	return de
}

// Encode builds the wire form of p with the given sequence_number.
func Encode(seq uint32, p PDU) ([]byte, error) {
	e := &encoder{b: make([]byte, HeaderLen, 64)}
	p.encode(e)
	if e.err != nil {
		return nil, fmt.Errorf("encoding %s: %w", p.Command(), e.err)
	}
	if len(e.b) > MaxPDUSize {
		return nil, fmt.Errorf("encoding %s: %w: %d bytes", p.Command(), ErrTooLarge, len(e.b))
	}
	var status uint32
	if r, ok := p.(response); ok {
		status = r.status()
	}
	binary.BigEndian.PutUint32(e.b[0:4], uint32(len(e.b)))
	binary.BigEndian.PutUint32(e.b[4:8], uint32(p.Command()))
	binary.BigEndian.PutUint32(e.b[8:12], status)
	binary.BigEndian.PutUint32(e.b[12:16], seq)
	return e.b, nil
}

// ReadFrame reads one PDU from r. It checks command_length against
// [HeaderLen, max] before allocating, so a hostile length cannot make it
// allocate more than max bytes. The error for a bad length is a
// *DecodeError carrying the header read so far.
func ReadFrame(r io.Reader, max int) ([]byte, error) {
	var hb [HeaderLen]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return nil, err
	}
	h, _ := ParseHeader(hb[:])
	if h.Length < HeaderLen || h.Length > uint32(max) {
		cause := ErrTooLarge
		if h.Length < HeaderLen {
			cause = ErrLength
		}
		return hb[:], &DecodeError{Command: h.Command, Field: "command_length", Status: StatusInvCmdLen,
			Err: fmt.Errorf("%w: command_length %d outside [%d, %d]", cause, h.Length, HeaderLen, max)}
	}
	frame := make([]byte, h.Length)
	copy(frame, hb[:])
	if _, err := io.ReadFull(r, frame[HeaderLen:]); err != nil {
		return nil, fmt.Errorf("reading %d-byte pdu: %w", h.Length, err)
	}
	return frame, nil
}
