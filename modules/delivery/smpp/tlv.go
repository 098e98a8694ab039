package smpp

import (
	"bytes"
	"fmt"
	"slices"
)

// Tag identifies an optional parameter (TLV).
type Tag uint16

// Tags this package reads or writes itself; any other tag is carried as
// raw bytes.
const (
	TagReceiptedMessageID Tag = 0x001E
	TagUserMessageRef     Tag = 0x0204
	TagSARMsgRefNum       Tag = 0x020C
	TagSARTotalSegments   Tag = 0x020E
	TagSARSegmentSeqnum   Tag = 0x020F
	TagSCInterfaceVersion Tag = 0x0210
	TagNetworkErrorCode   Tag = 0x0423
	TagMessagePayload     Tag = 0x0424
	TagMessageState       Tag = 0x0427
)

// TLV is one optional parameter. Value is the raw value; a C-Octet String
// value includes its NUL.
type TLV struct {
	Tag   Tag
	Value []byte
}

// TLVs keeps the optional parameters in wire order, so decoding and
// encoding give back the same bytes.
type TLVs []TLV

// Get returns the value of tag.
func (ts TLVs) Get(tag Tag) ([]byte, bool) {
	for _, t := range ts {
		if t.Tag == tag {
			return t.Value, true
		}
	}
	return nil, false
}

// CString returns a C-Octet String value without its NUL.
func (ts TLVs) CString(tag Tag) (string, bool) {
	v, ok := ts.Get(tag)
	if !ok || len(v) == 0 {
		return "", false
	}
	return string(bytes.TrimSuffix(v, []byte{0})), true
}

// Uint8 returns a one-octet integer value.
func (ts TLVs) Uint8(tag Tag) (uint8, bool) {
	v, ok := ts.Get(tag)
	if !ok || len(v) != 1 {
		return 0, false
	}
	return v[0], true
}

// Set replaces tag's value or appends it.
func (ts *TLVs) Set(tag Tag, value []byte) {
	for i := range *ts {
		if (*ts)[i].Tag == tag {
			(*ts)[i].Value = value
			return
		}
	}
	*ts = append(*ts, TLV{Tag: tag, Value: value})
}

// CStringValue is s as a C-Octet String TLV value.
func CStringValue(s string) []byte { return append([]byte(s), 0) }

// tlvs writes ts in order, refusing values that break the length rules
// so we never send what we would refuse to read.
func (e *encoder) tlvs(ts TLVs) {
	for i, t := range ts {
		if err := checkTLV(t.Tag, t.Value); err != nil {
			e.fail(err)
		}
		if slices.ContainsFunc(ts[:i], func(o TLV) bool { return o.Tag == t.Tag }) {
			e.failf("TLV %#04x appears twice", uint16(t.Tag))
		}
		e.u16(uint16(t.Tag))
		e.u16(uint16(len(t.Value)))
		e.raw(t.Value)
	}
}

// tlvs reads optional parameters to the end of the body. A truncated TLV
// or a repeated tag fails with ESME_RINVOPTPARSTREAM, a value of the
// wrong length with ESME_RINVPARLEN.
func (d *decoder) tlvs() TLVs {
	var ts TLVs
	for d.err == nil && d.left() > 0 {
		if d.left() < 4 {
			d.fail("tlv", StatusInvOptParStream, fmt.Errorf("%w: %d stray bytes after the last TLV", ErrLength, d.left()))
			return nil
		}
		tag, n := Tag(d.u16("tlv tag")), int(d.u16("tlv length"))
		if d.left() < n {
			d.fail("tlv", StatusInvOptParStream, fmt.Errorf("%w: TLV %#04x says %d bytes, %d left", ErrLength, uint16(tag), n, d.left()))
			return nil
		}
		if _, dup := ts.Get(tag); dup {
			d.fail("tlv", StatusInvOptParStream, fmt.Errorf("%w: TLV %#04x appears twice", ErrMalformed, uint16(tag)))
			return nil
		}
		v := d.bytes("tlv value", n)
		if err := checkTLV(tag, v); err != nil {
			d.fail("tlv", StatusInvParLen, err)
			return nil
		}
		ts = append(ts, TLV{Tag: tag, Value: v})
	}
	return ts
}
