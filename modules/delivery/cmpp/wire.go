package cmpp

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// encoder appends big-endian fields to a buffer and keeps the first error,
// so PDU encoders read as a flat list of fields.
type encoder struct {
	b   []byte
	err error
}

func (e *encoder) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

func (e *encoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *encoder) raw(p []byte) { e.b = append(e.b, p...) }

// str writes s into a fixed-width octet string, right-padded with NUL.
// A longer s is an error, never a silent truncation.
func (e *encoder) str(field, s string, width int) {
	if len(s) > width {
		e.fail(fmt.Errorf("%w: %s is %d bytes, field holds %d", ErrMalformed, field, len(s), width))
		s = s[:width]
	}
	e.b = append(e.b, s...)
	for range width - len(s) {
		e.b = append(e.b, 0)
	}
}

// result writes a Status/Result field of the given width (1 or 4 bytes).
func (e *encoder) result(field string, v uint32, width int) {
	if width == 4 {
		e.u32(v)
		return
	}
	if v > 0xff {
		e.fail(fmt.Errorf("%w: %s %d does not fit the 1-byte 2.0 field", ErrMalformed, field, v))
	}
	e.u8(uint8(v))
}

// onlyIn fails when a field that the version's layout lacks is set, so an
// encode never drops data silently.
func (e *encoder) onlyIn(want Version, v Version, field string, set bool) {
	if set && v.Family() != want {
		e.fail(fmt.Errorf("%w: %s exists only in CMPP %s", ErrMalformed, field, want))
	}
}

// decoder reads big-endian fields from a body. Every read is bounds
// checked; reading past the end records ErrLength and yields zero values.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b)-d.off < n {
		d.err = fmt.Errorf("%w: body ends at %d, field needs %d more bytes", ErrLength, len(d.b), n)
		return nil
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p
}

func (d *decoder) u8() uint8 {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

// str reads a fixed-width octet string and drops the NUL padding on the
// right. Only trailing NULs go, so encoding the result reproduces the wire
// bytes exactly (which the MD5 of CONNECT depends on).
func (d *decoder) str(width int) string {
	return strings.TrimRight(string(d.take(width)), "\x00")
}

// bytes returns a copy, so decoded PDUs never alias the read buffer.
func (d *decoder) bytes(n int) []byte {
	p := d.take(n)
	if p == nil {
		return nil
	}
	return append([]byte(nil), p...)
}

func (d *decoder) result(width int) uint32 {
	if width == 4 {
		return d.u32()
	}
	return uint32(d.u8())
}

// finish reports the first error, or ErrLength when bytes are left over.
func (d *decoder) finish() error {
	if d.err == nil && d.off != len(d.b) {
		d.err = fmt.Errorf("%w: %d bytes left after the last field", ErrLength, len(d.b)-d.off)
	}
	return d.err
}
