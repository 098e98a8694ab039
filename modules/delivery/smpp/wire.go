package smpp

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// encoder appends big-endian fields and keeps the first error, so PDU
// encoders read as a flat list of fields.
type encoder struct {
	b   []byte
	err error
}

func (e *encoder) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

func (e *encoder) failf(format string, args ...any) {
	e.fail(fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...))
}

func (e *encoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *encoder) u16(v uint16) { e.b = binary.BigEndian.AppendUint16(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *encoder) raw(p []byte) { e.b = append(e.b, p...) }

// cstr writes s as a C-Octet String whose size, NUL included, may be at
// most max. A longer s or an embedded NUL is an error, never a silent
// truncation.
func (e *encoder) cstr(field, s string, max int) {
	if len(s)+1 > max {
		e.failf("%s is %d bytes, the field holds %d", field, len(s), max-1)
	}
	if bytes.IndexByte([]byte(s), 0) >= 0 {
		e.failf("%s contains a NUL", field)
	}
	e.b = append(append(e.b, s...), 0)
}

// decoder reads fields from a PDU body. Every read is bounds checked; the
// first failure is kept as a *DecodeError naming the field and the status
// to answer it with, and later reads yield zero values.
type decoder struct {
	b   []byte
	off int
	cmd CommandID
	err error
}

func (d *decoder) fail(field string, status uint32, err error) {
	if d.err == nil {
		d.err = &DecodeError{Command: d.cmd, Field: field, Status: status, Err: err}
	}
}

func (d *decoder) left() int { return len(d.b) - d.off }

// take returns the next n bytes; a short body fails with
// ESME_RINVCMDLEN, since command_length then cut the field off.
func (d *decoder) take(field string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || d.left() < n {
		d.fail(field, StatusInvCmdLen, fmt.Errorf("%w: body ends %d bytes in, %s needs %d more", ErrLength, len(d.b), field, n))
		return nil
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p
}

func (d *decoder) u8(field string) uint8 {
	if p := d.take(field, 1); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u16(field string) uint16 {
	if p := d.take(field, 2); p != nil {
		return binary.BigEndian.Uint16(p)
	}
	return 0
}

// cstr reads a C-Octet String of at most max bytes, NUL included. A NUL
// not found within max bytes fails with status: the field is too long.
func (d *decoder) cstr(field string, status uint32, max int) string {
	if d.err != nil {
		return ""
	}
	window := d.b[d.off:]
	if len(window) > max {
		window = window[:max]
	}
	i := bytes.IndexByte(window, 0)
	if i < 0 {
		d.fail(field, status, fmt.Errorf("%w: no NUL within %d bytes", ErrMalformed, max))
		return ""
	}
	d.off += i + 1
	return string(window[:i])
}

// bytes returns a copy, so decoded PDUs never alias the read buffer; nil
// for n == 0.
func (d *decoder) bytes(field string, n int) []byte {
	p := d.take(field, n)
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}

// finish fails when bytes are left over in a PDU that has no optional
// part.
func (d *decoder) finish() error {
	if d.err == nil && d.left() != 0 {
		d.fail("command_length", StatusInvCmdLen, fmt.Errorf("%w: %d bytes left after the last field", ErrLength, d.left()))
	}
	return d.err
}
