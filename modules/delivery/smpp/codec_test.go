package smpp_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/keelwork/keel/modules/delivery/smpp"
)

func TestCodecRoundTrip(t *testing.T) {
	for i, p := range samplePDUs(t) {
		b := mustEncode(t, 77, p)
		h, got, err := smpp.Decode(b)
		if err != nil {
			t.Fatalf("%d %s: %v", i, p.Command(), err)
		}
		if h.Length != uint32(len(b)) || h.Command != p.Command() || h.Seq != 77 {
			t.Errorf("%d: header %+v", i, h)
		}
		if !reflect.DeepEqual(got, p) {
			t.Errorf("%d %s: decoded %+v\nwant    %+v", i, p.Command(), got, p)
		}
		if again := mustEncode(t, 77, got); !bytes.Equal(again, b) {
			t.Errorf("%d %s: re-encoding differs", i, p.Command())
		}
	}
}

func TestCodecLengths(t *testing.T) {
	cases := []struct {
		p    smpp.PDU
		want int
	}{
		{&smpp.EnquireLink{}, 16},
		{&smpp.GenericNack{Status: 3}, 16},
		{&smpp.Bind{Type: smpp.BindReceiver}, 16 + 7},
		{&smpp.BindResp{Type: smpp.BindTransmitter, Status: smpp.StatusInvPaswd}, 16},
		{&smpp.BindResp{Type: smpp.BindTransceiver, Status: smpp.StatusInvPaswd, SystemID: "keel"}, 16 + 5},
		{&smpp.SubmitSMResp{MessageID: "abc"}, 16 + 4},
		{&smpp.SubmitSMResp{}, 16 + 1},
		{&smpp.SubmitSMResp{Status: smpp.StatusSysErr}, 16},
		{&smpp.DeliverSMResp{}, 16 + 1},
		{&smpp.SubmitSM{}, 16 + 17},
		{sampleMO(), 16 + 17 + 13 + 6 + 4},
	}
	for _, c := range cases {
		if b := mustEncode(t, 1, c.p); len(b) != c.want {
			t.Errorf("%s %+v: %d bytes, want %d", c.p.Command(), c.p, len(b), c.want)
		}
	}
}

// Peers differ on error-response bodies; each form decodes and encodes
// back to the same bytes.
func TestResponseBodyForms(t *testing.T) {
	for _, b := range [][]byte{
		frame(uint32(smpp.CmdSubmitSMResp), 1, nil),
		frame(uint32(smpp.CmdDeliverSMResp), 1, nil), // status 0, no body: sloppy but common
		withStatus(frame(uint32(smpp.CmdDeliverSMResp), 1, []byte{0}), smpp.StatusXTAppn),
		withStatus(frame(uint32(smpp.CmdSubmitSMResp), 1, nil), smpp.StatusSysErr),
		withStatus(frame(uint32(smpp.CmdBindTransmitterResp), 1, []byte("keel\x00")), smpp.StatusInvPaswd),
		frame(uint32(smpp.CmdBindReceiverResp), 1, nil),
	} {
		h, p, err := smpp.Decode(b)
		if err != nil {
			t.Fatalf("%x: %v", b, err)
		}
		if again := mustEncode(t, h.Seq, p); !bytes.Equal(again, b) {
			t.Errorf("%s: re-encoded %x, read %x", h.Command, again, b)
		}
	}
}

func withStatus(b []byte, s uint32) []byte {
	b[8], b[9], b[10], b[11] = byte(s>>24), byte(s>>16), byte(s>>8), byte(s)
	return b
}

func TestMaxPDUSize(t *testing.T) {
	d := &smpp.DeliverSM{}
	base := len(mustEncode(t, 1, d)) + 4 // plus the TLV header
	d.TLVs = smpp.TLVs{{Tag: smpp.TagMessagePayload, Value: make([]byte, smpp.MaxPDUSize-base)}}
	b := mustEncode(t, 1, d)
	if len(b) != smpp.MaxPDUSize {
		t.Fatalf("%d bytes", len(b))
	}
	if _, _, err := smpp.Decode(b); err != nil {
		t.Fatalf("largest deliver_sm: %v", err)
	}
	d.TLVs[0].Value = append(d.TLVs[0].Value, 0)
	if _, err := smpp.Encode(1, d); !errors.Is(err, smpp.ErrTooLarge) {
		t.Errorf("one byte more: %v", err)
	}
	if _, _, err := smpp.Decode(withLength(append(bytes.Clone(b), 0))); !errors.Is(err, smpp.ErrTooLarge) {
		t.Errorf("oversized frame: %v", err)
	}
}

func TestReadFrame(t *testing.T) {
	b := mustEncode(t, 3, sampleSubmit())
	stream := bytes.NewReader(append(bytes.Clone(b), b...))
	for range 2 {
		if got, err := smpp.ReadFrame(stream, smpp.MaxPDUSize); err != nil || !bytes.Equal(got, b) {
			t.Fatalf("ReadFrame: %v", err)
		}
	}
	short := frame(uint32(smpp.CmdEnquireLink), 4, nil)
	short[3] = 15
	if h, err := smpp.ReadFrame(bytes.NewReader(short), 100); !errors.Is(err, smpp.ErrLength) || len(h) != 16 {
		t.Errorf("length 15: %v (header %x)", err, h)
	}
	huge := bytes.Repeat([]byte{0xff}, 16)
	if _, err := smpp.ReadFrame(bytes.NewReader(huge), 100); !errors.Is(err, smpp.ErrTooLarge) || smpp.StatusOf(err) != smpp.StatusInvCmdLen {
		t.Errorf("length 4G: %v", err)
	}
	if _, err := smpp.ReadFrame(bytes.NewReader(b[:20]), 4096); err == nil {
		t.Error("truncated frame read without error")
	}
}

func TestEncodeRejects(t *testing.T) {
	long := strings.Repeat("9", 21)
	cases := map[string]smpp.PDU{
		"system_id":         &smpp.Bind{Type: smpp.BindReceiver, SystemID: strings.Repeat("s", 16)},
		"password":          &smpp.Bind{Type: smpp.BindReceiver, Password: "123456789"},
		"bind type":         &smpp.Bind{},
		"NUL in string":     &smpp.Bind{Type: smpp.BindTransmitter, SystemType: "a\x00b"},
		"source_addr":       &smpp.SubmitSM{Message: smpp.Message{Source: smpp.Address{Addr: long}}},
		"service_type":      &smpp.SubmitSM{Message: smpp.Message{ServiceType: "TOOLONG"}},
		"schedule":          &smpp.SubmitSM{Message: smpp.Message{ScheduleDeliveryTime: "2608141530"}},
		"short_message":     &smpp.SubmitSM{Message: smpp.Message{ShortMessage: make([]byte, 255)}},
		"payload and sm":    &smpp.DeliverSM{Message: smpp.Message{ShortMessage: []byte("x"), TLVs: smpp.TLVs{{Tag: smpp.TagMessagePayload}}}},
		"deliver validity":  &smpp.DeliverSM{Message: smpp.Message{ValidityPeriod: "000001000000000R"}},
		"tlv length":        &smpp.DeliverSM{Message: smpp.Message{TLVs: smpp.TLVs{{Tag: smpp.TagMessageState, Value: []byte{1, 2}}}}},
		"tlv cstring":       &smpp.DeliverSM{Message: smpp.Message{TLVs: smpp.TLVs{{Tag: smpp.TagReceiptedMessageID, Value: []byte("id")}}}},
		"tlv twice":         &smpp.DeliverSM{Message: smpp.Message{TLVs: smpp.TLVs{{Tag: 0x1400}, {Tag: 0x1400}}}},
		"message_id":        &smpp.SubmitSMResp{MessageID: strings.Repeat("f", 65)},
		"bodyless with tlv": &smpp.BindResp{Type: smpp.BindReceiver, Status: 1, TLVs: smpp.TLVs{{Tag: 0x1400}}},
	}
	for name, p := range cases {
		if _, err := smpp.Encode(1, p); !errors.Is(err, smpp.ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
}
