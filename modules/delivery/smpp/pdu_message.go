package smpp

import "fmt"

// Address is a TON, an NPI and an address of at most 20 bytes.
type Address struct {
	TON  uint8
	NPI  uint8
	Addr string
}

// ESM class bits used here: the message type bits (2 to 5) and UDHI.
const (
	ESMClassTypeMask uint8 = 0x3C
	ESMClassReceipt  uint8 = 0x04 // SMSC delivery receipt
	ESMClassUDHI     uint8 = 0x40 // short_message starts with a user data header
)

// maxShortMessage is the sm_length limit; longer content travels in the
// message_payload TLV.
const maxShortMessage = 254

// Message is the body submit_sm and deliver_sm share. DataCoding and the
// content bytes are passed through untouched. C-Octet String limits (NUL
// included): service_type 6, addresses 21, schedule_delivery_time and
// validity_period 17 (empty or 16 characters).
type Message struct {
	ServiceType          string
	Source               Address
	Dest                 Address
	ESMClass             uint8
	ProtocolID           uint8
	PriorityFlag         uint8
	ScheduleDeliveryTime string
	ValidityPeriod       string
	RegisteredDelivery   uint8
	ReplaceIfPresent     uint8
	DataCoding           uint8
	SMDefaultMsgID       uint8
	ShortMessage         []byte // at most 254 bytes
	TLVs                 TLVs
}

// Content is the message text: the message_payload TLV when present,
// else ShortMessage.
func (m *Message) Content() []byte {
	if v, ok := m.TLVs.Get(TagMessagePayload); ok {
		return v
	}
	return m.ShortMessage
}

func (m *Message) encode(e *encoder) {
	if len(m.ShortMessage) > maxShortMessage {
		e.failf("short_message is %d bytes, sm_length holds %d", len(m.ShortMessage), maxShortMessage)
	}
	if _, ok := m.TLVs.Get(TagMessagePayload); ok && len(m.ShortMessage) > 0 {
		e.failf("short_message and message_payload are both set")
	}
	for _, t := range []struct{ field, v string }{
		{"schedule_delivery_time", m.ScheduleDeliveryTime}, {"validity_period", m.ValidityPeriod},
	} {
		if err := checkTime(t.field, t.v); err != nil {
			e.fail(err)
		}
	}
	e.cstr("service_type", m.ServiceType, 6)
	e.address("source_addr", m.Source)
	e.address("destination_addr", m.Dest)
	e.u8(m.ESMClass)
	e.u8(m.ProtocolID)
	e.u8(m.PriorityFlag)
	e.cstr("schedule_delivery_time", m.ScheduleDeliveryTime, 17)
	e.cstr("validity_period", m.ValidityPeriod, 17)
	e.u8(m.RegisteredDelivery)
	e.u8(m.ReplaceIfPresent)
	e.u8(m.DataCoding)
	e.u8(m.SMDefaultMsgID)
	e.u8(uint8(len(m.ShortMessage)))
	e.raw(m.ShortMessage)
	e.tlvs(m.TLVs)
}

func (e *encoder) address(field string, a Address) {
	e.u8(a.TON)
	e.u8(a.NPI)
	e.cstr(field, a.Addr, 21)
}

func (m *Message) decode(d *decoder) {
	m.ServiceType = d.cstr("service_type", StatusInvSerTyp, 6)
	m.Source = d.address("source_addr", StatusInvSrcAdr)
	m.Dest = d.address("destination_addr", StatusInvDstAdr)
	m.ESMClass = d.u8("esm_class")
	m.ProtocolID = d.u8("protocol_id")
	m.PriorityFlag = d.u8("priority_flag")
	m.ScheduleDeliveryTime = d.time("schedule_delivery_time", StatusInvSched)
	m.ValidityPeriod = d.time("validity_period", StatusInvExpiry)
	m.RegisteredDelivery = d.u8("registered_delivery")
	m.ReplaceIfPresent = d.u8("replace_if_present_flag")
	m.DataCoding = d.u8("data_coding")
	m.SMDefaultMsgID = d.u8("sm_default_msg_id")
	n := int(d.u8("sm_length"))
	if n > maxShortMessage {
		d.fail("sm_length", StatusInvMsgLen, fmt.Errorf("%w: sm_length %d, at most %d", ErrMalformed, n, maxShortMessage))
	}
	m.ShortMessage = d.bytes("short_message", n)
	m.TLVs = d.tlvs()
	if _, ok := m.TLVs.Get(TagMessagePayload); ok && n > 0 {
		d.fail("message_payload", StatusInvMsgLen, fmt.Errorf("%w: message_payload with a non-empty short_message", ErrMalformed))
	}
}

func (d *decoder) address(field string, status uint32) Address {
	var a Address
	a.TON = d.u8(field + " ton")
	a.NPI = d.u8(field + " npi")
	a.Addr = d.cstr(field, status, 21)
	return a
}

// time reads a schedule_delivery_time or validity_period.
func (d *decoder) time(field string, status uint32) string {
	s := d.cstr(field, status, 17)
	if err := checkTime(field, s); err != nil {
		d.fail(field, status, err)
	}
	return s
}

// checkTime accepts an empty time or the 16-character absolute
// (YYMMDDhhmmsstnn followed by + or -) or relative (... R) form.
func checkTime(field, s string) error {
	if s == "" {
		return nil
	}
	ok := len(s) == 16 && (s[15] == '+' || s[15] == '-' || s[15] == 'R')
	for i := 0; ok && i < 15; i++ {
		ok = s[i] >= '0' && s[i] <= '9'
	}
	if !ok {
		return fmt.Errorf("%w: %s %q is not YYMMDDhhmmsstnn[+-R]", ErrMalformed, field, s)
	}
	return nil
}
