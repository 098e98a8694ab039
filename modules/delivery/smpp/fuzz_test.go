package smpp_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/keelwork/keel/modules/delivery/smpp"
)

// Committed seeds under testdata/fuzz/FuzzDecode hold PDUs marshalled by
// gosmpp (the customer's encoder); f.Add adds our own encoding of every
// PDU type.
func FuzzDecode(f *testing.F) {
	for _, p := range samplePDUs(f) {
		f.Add(mustEncode(f, 1, p))
	}
	f.Add(frame(uint32(smpp.CmdQuerySM), 1, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, p, err := smpp.Decode(b)
		if err != nil {
			var de *smpp.DecodeError
			if !errors.As(err, &de) || !isCodecError(err) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		// Decoding is lossless: re-encoding gives back the same bytes.
		again, err := smpp.Encode(h.Seq, p)
		if err != nil {
			t.Fatalf("re-encoding %s: %v", h.Command, err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %s differs\n got %x\nwant %x", h.Command, again, b)
		}
		if _, p2, err := smpp.Decode(again); err != nil || !reflect.DeepEqual(p, p2) {
			t.Fatalf("second decode: %v", err)
		}
	})
}

func isCodecError(err error) bool {
	for _, e := range []error{smpp.ErrLength, smpp.ErrTooLarge, smpp.ErrMalformed, smpp.ErrUnknownCommand} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// FuzzReadFrame splits an arbitrary stream into frames without panicking
// or returning a frame outside [HeaderLen, max].
func FuzzReadFrame(f *testing.F) {
	for _, p := range samplePDUs(f) {
		f.Add(mustEncode(f, 1, p))
	}
	f.Add([]byte{0, 0, 0, 5})
	f.Add(bytes.Repeat([]byte{0xff}, 20))
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := bytes.NewReader(stream)
		for {
			b, err := smpp.ReadFrame(r, 4096)
			if err != nil {
				return
			}
			if len(b) < smpp.HeaderLen || len(b) > 4096 {
				t.Fatalf("frame of %d bytes", len(b))
			}
			smpp.Decode(b)
		}
	})
}

// FuzzEncodeMessage builds submit_sm and deliver_sm from arbitrary field
// values: Encode either refuses them or Decode gives them back.
func FuzzEncodeMessage(f *testing.F) {
	f.Add(false, "CMT", "KEEL", "8613500002696", uint8(0x40), uint8(8), "260814153000004+", []byte("hi"), uint16(0x0204), []byte{0, 1})
	f.Add(true, "", "", "", uint8(4), uint8(0), "", []byte{}, uint16(0x0424), []byte("payload"))
	f.Add(true, "TOOLONG", strings.Repeat("9", 21), "a\x00", uint8(0), uint8(0), "x", make([]byte, 255), uint16(0x0427), []byte{1, 2})
	f.Fuzz(func(t *testing.T, deliver bool, service, src, dst string, esm, dcs uint8, when string, sm []byte, tag uint16, val []byte) {
		m := smpp.Message{ServiceType: service, Source: smpp.Address{TON: 1, Addr: src}, Dest: smpp.Address{NPI: 1, Addr: dst},
			ESMClass: esm, DataCoding: dcs, ScheduleDeliveryTime: when, ShortMessage: sm,
			TLVs: smpp.TLVs{{Tag: smpp.Tag(tag), Value: val}}}
		want := m
		want.ShortMessage, want.TLVs = nilIfEmpty(sm), smpp.TLVs{{Tag: smpp.Tag(tag), Value: nilIfEmpty(val)}}
		var p, exp smpp.PDU = &smpp.SubmitSM{Message: m}, &smpp.SubmitSM{Message: want}
		if deliver {
			p, exp = &smpp.DeliverSM{Message: m}, &smpp.DeliverSM{Message: want}
		}
		b, err := smpp.Encode(3, p)
		if err != nil {
			if !errors.Is(err, smpp.ErrMalformed) && !errors.Is(err, smpp.ErrTooLarge) {
				t.Fatalf("encode error %v", err)
			}
			return
		}
		if _, got, err := smpp.Decode(b); err != nil || !reflect.DeepEqual(got, exp) {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, got, exp)
		}
	})
}

// FuzzReceipt: any text parses or fails cleanly; any receipt either is
// refused or comes back from its deliver_sm as it went in (defaults
// filled, text cut to 20 bytes).
func FuzzReceipt(f *testing.F) {
	f.Add("0007000652a1b2c3d4e5", 1, 1, "2608141530", "2608141532", "DELIVRD", "", "hello", uint8(0))
	f.Add("x", 0, 999, "260814153012", "260814153012", "MA:0001", "034", "stat:X id:y text:z 你好你好你好", uint8(5))
	f.Add("a b", -1, 1000, "", "x", "DELIVERED", "0000", "", uint8(9))
	f.Fuzz(func(t *testing.T, id string, sub, dlvrd int, sd, dd, stat, errCode, text string, state uint8) {
		smpp.ParseReceiptText(text)
		in := smpp.Receipt{ID: id, Submitted: sub, Delivered: dlvrd, SubmitDate: sd, DoneDate: dd,
			Stat: stat, Err: errCode, Text: text, State: smpp.MessageState(state)}
		d, err := in.DeliverSM(smpp.Address{}, smpp.Address{})
		if err != nil {
			if !errors.Is(err, smpp.ErrMalformed) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		got, err := d.Receipt()
		if err != nil {
			t.Fatalf("our own receipt: %v\n%s", err, d.ShortMessage)
		}
		if len(got.Text) > 20 || !strings.HasPrefix(text, got.Text) || len(text)-len(got.Text) > max(0, len(text)-20)+3 {
			t.Fatalf("text %q cut to %q", text, got.Text)
		}
		want := in
		want.Text = got.Text
		if want.Err == "" {
			want.Err = "000"
		}
		if want.State == 0 {
			want.State = smpp.StateForStat(stat)
		}
		if *got != want {
			t.Fatalf("round trip\n got %+v\nwant %+v", *got, want)
		}
	})
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}
