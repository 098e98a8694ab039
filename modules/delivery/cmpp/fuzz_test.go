package cmpp_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/keelwork/keel/modules/delivery/cmpp"
)

// Committed seeds under testdata/fuzz hold frames packed by gocmpp (the
// customer's encoder); f.Add adds our own encoding of every PDU type and
// report layout.
func FuzzDecodeV20(f *testing.F) { fuzzDecode(f, cmpp.V20) }
func FuzzDecodeV30(f *testing.F) { fuzzDecode(f, cmpp.V30) }

func fuzzDecode(f *testing.F, v cmpp.Version) {
	for _, p := range append(samplePDUs(v), sampleReportDeliver(v, cmpp.V20), sampleReportDeliver(v, cmpp.V30)) {
		f.Add(mustEncode(f, v, p))
	}
	f.Add(frame(uint32(cmpp.CmdQuery), nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, p, err := cmpp.Decode(v, b)
		if err != nil {
			if !isCodecError(err) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		// Decoding is lossless: re-encoding gives back the same bytes.
		again, err := cmpp.Encode(v, h.Seq, p)
		if err != nil {
			t.Fatalf("re-encoding %s: %v", h.Command, err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %s differs\n got %x\nwant %x", h.Command, again, b)
		}
		_, p2, err := cmpp.Decode(v, again)
		if err != nil || !reflect.DeepEqual(p, p2) {
			t.Fatalf("second decode: %v", err)
		}
	})
}

func isCodecError(err error) bool {
	for _, e := range []error{cmpp.ErrLength, cmpp.ErrTooLarge, cmpp.ErrMalformed, cmpp.ErrUnknownCommand} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// FuzzReadFrame splits an arbitrary stream into frames without panicking
// or returning a frame outside [HeaderLen, max].
func FuzzReadFrame(f *testing.F) {
	for _, p := range samplePDUs(cmpp.V30) {
		f.Add(mustEncode(f, cmpp.V30, p))
	}
	f.Add([]byte{0, 0, 0, 5})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0})
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := bytes.NewReader(stream)
		max := cmpp.MaxPDUSize(cmpp.V30)
		for {
			b, err := cmpp.ReadFrame(r, max)
			if err != nil {
				return
			}
			if len(b) < cmpp.HeaderLen || len(b) > max {
				t.Fatalf("frame of %d bytes", len(b))
			}
			cmpp.Decode(cmpp.V30, b)
		}
	})
}

// FuzzEncodeDeliver builds DELIVERs (what the server sends) from arbitrary
// field values: Encode either refuses them as malformed or Decode gives
// them back, with only trailing NUL padding removed from strings.
func FuzzEncodeDeliver(f *testing.F) {
	f.Add(true, uint8(0), "106900001234", "13500002696", []byte("hi"), uint64(1), "DELIVRD", "2608141530", uint32(42), uint8(0))
	f.Add(false, uint8(8), "1069", "138", []byte{}, uint64(7), "UNDELIV", "", uint32(0), uint8(0x20))
	f.Add(true, uint8(15), strings.Repeat("9", 22), "1\x00", []byte{0}, uint64(0), "MA:0001", "x\x00", uint32(1), uint8(0x30))
	f.Fuzz(func(t *testing.T, v3 bool, fmtByte uint8, dest, src string, content []byte,
		inner uint64, stat, when string, smsc uint32, layout uint8) {
		v := cmpp.V20
		if v3 {
			v = cmpp.V30
		}
		d := &cmpp.Deliver{MsgID: 99, DestID: dest, MsgFmt: fmtByte, SrcTerminalID: src, Content: content}
		if layout != 0 {
			d.Content = nil
			d.Report = &cmpp.Report{MsgID: cmpp.MsgID(inner), Stat: stat, SubmitTime: when, DoneTime: when,
				DestTerminalID: src, SMSCSequence: smsc, Layout: cmpp.Version(layout)}
		}
		checkEncodeRoundTrip(t, v, d, normalizeDeliver(d, v))
	})
}

// FuzzEncodeSubmit does the same for SUBMIT.
func FuzzEncodeSubmit(f *testing.F) {
	f.Add(true, "1069000001", "13500002696", uint8(2), []byte("hello"), "LINK")
	f.Add(false, "", "", uint8(0), []byte{}, "")
	f.Add(false, "1\x00", strings.Repeat("1", 33), uint8(101), make([]byte, 256), "r")
	f.Fuzz(func(t *testing.T, v3 bool, srcID, dest string, n uint8, content []byte, tail string) {
		v := cmpp.V20
		s := &cmpp.Submit{SrcID: srcID, Content: content, Reserve: tail}
		if v3 {
			v, s.Reserve, s.LinkID, s.FeeTerminalType = cmpp.V30, "", tail, 1
		}
		for range n {
			s.DestTerminalIDs = append(s.DestTerminalIDs, dest)
		}
		want := *s
		want.SrcID, want.Reserve, want.LinkID = trimNUL(s.SrcID), trimNUL(s.Reserve), trimNUL(s.LinkID)
		want.DestTerminalIDs = nil
		for _, d := range s.DestTerminalIDs {
			want.DestTerminalIDs = append(want.DestTerminalIDs, trimNUL(d))
		}
		want.Content = nilIfEmpty(s.Content)
		checkEncodeRoundTrip(t, v, s, &want)
	})
}

func checkEncodeRoundTrip(t *testing.T, v cmpp.Version, p, want cmpp.PDU) {
	t.Helper()
	b, err := cmpp.Encode(v, 5, p)
	if err != nil {
		if !errors.Is(err, cmpp.ErrMalformed) && !errors.Is(err, cmpp.ErrUnsupportedVersion) {
			t.Fatalf("encode error %v", err)
		}
		return
	}
	_, got, err := cmpp.Decode(v, b)
	if err != nil {
		t.Fatalf("decoding what we encoded: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip\n got %+v\nwant %+v", got, want)
	}
}

func normalizeDeliver(d *cmpp.Deliver, v cmpp.Version) *cmpp.Deliver {
	w := *d
	w.DestID, w.SrcTerminalID = trimNUL(d.DestID), trimNUL(d.SrcTerminalID)
	w.Content = nilIfEmpty(d.Content)
	if d.Report != nil {
		r := *d.Report
		r.Stat, r.SubmitTime, r.DoneTime = trimNUL(r.Stat), trimNUL(r.SubmitTime), trimNUL(r.DoneTime)
		r.DestTerminalID = trimNUL(r.DestTerminalID)
		r.Layout = r.Layout.Family()
		w.Report = &r
	}
	return &w
}

func trimNUL(s string) string { return strings.TrimRight(s, "\x00") }

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}
