package cmpp_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/keelwork/keel/modules/delivery/cmpp"
)

func TestCodecRoundTrip(t *testing.T) {
	for _, v := range versions {
		for _, p := range samplePDUs(v) {
			t.Run(v.String()+"/"+p.Command().String(), func(t *testing.T) {
				b, err := cmpp.Encode(v, 77, p)
				if err != nil {
					t.Fatal(err)
				}
				h, got, err := cmpp.Decode(v, b)
				if err != nil {
					t.Fatal(err)
				}
				if h != (cmpp.Header{Length: uint32(len(b)), Command: p.Command(), Seq: 77}) {
					t.Errorf("header %+v", h)
				}
				if !reflect.DeepEqual(got, p) {
					t.Errorf("decoded %+v\nwant    %+v", got, p)
				}
				again, err := cmpp.Encode(v, 77, got)
				if err != nil || !bytes.Equal(again, b) {
					t.Errorf("re-encoding differs (err %v)", err)
				}
			})
		}
	}
}

func TestCodecLengths(t *testing.T) {
	cases := []struct {
		v    cmpp.Version
		p    cmpp.PDU
		want int
	}{
		{cmpp.V20, &cmpp.Connect{}, 39},
		{cmpp.V20, &cmpp.ConnectResp{}, 30},
		{cmpp.V30, &cmpp.ConnectResp{}, 33},
		{cmpp.V20, &cmpp.SubmitResp{}, 21},
		{cmpp.V30, &cmpp.SubmitResp{}, 24},
		{cmpp.V20, &cmpp.DeliverResp{}, 21},
		{cmpp.V30, &cmpp.DeliverResp{}, 24},
		{cmpp.V20, &cmpp.ActiveTest{}, 12},
		{cmpp.V20, &cmpp.ActiveTestResp{}, 13},
		{cmpp.V30, &cmpp.Terminate{}, 12},
		{cmpp.V20, &cmpp.Submit{}, 12 + 126},
		{cmpp.V30, &cmpp.Submit{}, 12 + 151},
		{cmpp.V20, sampleReportDeliver(cmpp.V20, 0), 12 + 65 + 60 + 8},
		{cmpp.V30, sampleReportDeliver(cmpp.V30, 0), 12 + 77 + 71 + 20},
		{cmpp.V30, sampleReportDeliver(cmpp.V30, cmpp.V20), 12 + 77 + 60 + 20},
		{cmpp.V20, sampleReportDeliver(cmpp.V20, cmpp.V30), 12 + 65 + 71 + 8},
	}
	for _, c := range cases {
		b, err := cmpp.Encode(c.v, 1, c.p)
		if err != nil {
			t.Fatalf("%s %s: %v", c.v, c.p.Command(), err)
		}
		if len(b) != c.want {
			t.Errorf("%s %s: %d bytes, want %d", c.v, c.p.Command(), len(b), c.want)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, v := range versions {
		for _, p := range samplePDUs(v) {
			b, err := cmpp.Encode(v, 1, p)
			if err != nil {
				t.Fatal(err)
			}
			name := v.String() + " " + p.Command().String()
			expectErr(t, name+" short", v, withLength(b[:len(b)-1]), cmpp.ErrLength)
			expectErr(t, name+" long", v, withLength(append(bytes.Clone(b), 0)), cmpp.ErrLength)
			expectErr(t, name+" total_length", v, setU32(bytes.Clone(b), 0, uint32(len(b)+1)), cmpp.ErrLength)
		}
		expectErr(t, "header only partly", v, []byte{0, 0, 0, 12, 0}, cmpp.ErrLength)
		expectErr(t, "unknown command", v, frame(0x00000055, nil), cmpp.ErrUnknownCommand)
		expectErr(t, "query", v, frame(uint32(cmpp.CmdQuery), make([]byte, 27)), cmpp.ErrUnknownCommand)
		expectErr(t, "too large", v, frame(uint32(cmpp.CmdSubmit), make([]byte, cmpp.MaxPDUSize(v))), cmpp.ErrTooLarge)
	}
	expectErr(t, "bad version", cmpp.Version(0x31), frame(uint32(cmpp.CmdActiveTest), nil), cmpp.ErrUnsupportedVersion)
}

func TestDecodeRejectsFieldValues(t *testing.T) {
	for _, v := range versions {
		b := mustEncode(t, v, sampleSubmit(v))
		dest := destCountOffset(v)
		b[dest] = 101
		expectErr(t, v.String()+" DestUsr_tl 101", v, b, cmpp.ErrMalformed)

		b = mustEncode(t, v, sampleMO(v))
		b[registeredOffset(v)] = 2
		expectErr(t, v.String()+" Registered_Delivery 2", v, b, cmpp.ErrMalformed)

		b = mustEncode(t, v, sampleMO(v)) // 4 bytes of content flagged as a report
		b[registeredOffset(v)] = 1
		expectErr(t, v.String()+" 4-byte report", v, b, cmpp.ErrLength)

		b = mustEncode(t, v, sampleSubmit(v)) // Msg_Length one more than present
		b[len(b)-tailLen(v)-len(sampleSubmit(v).Content)-1]++
		expectErr(t, v.String()+" Msg_Length", v, b, cmpp.ErrLength)
	}
}

func TestEncodeRejects(t *testing.T) {
	long := strings.Repeat("1", 22)
	cases := []struct {
		name string
		v    cmpp.Version
		p    cmpp.PDU
	}{
		{"source addr", cmpp.V30, &cmpp.Connect{SourceAddr: "1234567"}},
		{"2.0 status", cmpp.V20, &cmpp.ConnectResp{Status: 256}},
		{"2.0 result", cmpp.V20, &cmpp.SubmitResp{Result: 300}},
		{"2.0 deliver result", cmpp.V20, &cmpp.DeliverResp{Result: 300}},
		{"terminal", cmpp.V20, &cmpp.Submit{DestTerminalIDs: []string{long}}},
		{"3.0 field on 2.0", cmpp.V20, &cmpp.Submit{LinkID: "x"}},
		{"2.0 field on 3.0", cmpp.V30, &cmpp.Deliver{Reserve: "x"}},
		{"content", cmpp.V30, &cmpp.Deliver{Content: make([]byte, 256)}},
		{"report and content", cmpp.V30, &cmpp.Deliver{Content: []byte("x"), Report: &cmpp.Report{}}},
		{"stat", cmpp.V30, &cmpp.Deliver{Report: &cmpp.Report{Stat: "DELIVERED"}}},
		{"report layout", cmpp.V30, &cmpp.Deliver{Report: &cmpp.Report{Layout: 0x40}}},
		{"destinations", cmpp.V30, &cmpp.Submit{DestTerminalIDs: make([]string, 101)}},
	}
	for _, c := range cases {
		if _, err := cmpp.Encode(c.v, 1, c.p); !errors.Is(err, cmpp.ErrMalformed) && !errors.Is(err, cmpp.ErrUnsupportedVersion) {
			t.Errorf("%s: err %v, want ErrMalformed", c.name, err)
		}
	}
	if _, err := cmpp.Encode(0x13, 1, &cmpp.ActiveTest{}); !errors.Is(err, cmpp.ErrUnsupportedVersion) {
		t.Errorf("version 0x13: err %v", err)
	}
}

func TestMaxPDUSize(t *testing.T) {
	for _, v := range versions {
		s := sampleSubmit(v)
		s.DestTerminalIDs = make([]string, 100)
		s.Content = make([]byte, 255)
		b := mustEncode(t, v, s)
		if len(b) != cmpp.MaxPDUSize(v) {
			t.Errorf("%s: largest submit is %d bytes, MaxPDUSize %d", v, len(b), cmpp.MaxPDUSize(v))
		}
		if _, _, err := cmpp.Decode(v, b); err != nil {
			t.Errorf("%s: largest submit: %v", v, err)
		}
	}
}

func TestReadFrame(t *testing.T) {
	b := mustEncode(t, cmpp.V30, sampleSubmit(cmpp.V30))
	stream := bytes.NewReader(append(bytes.Clone(b), b...))
	for range 2 {
		got, err := cmpp.ReadFrame(stream, cmpp.MaxPDUSize(cmpp.V30))
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("ReadFrame: %v", err)
		}
	}
	if _, err := cmpp.ReadFrame(bytes.NewReader([]byte{0, 0, 0, 11}), 100); !errors.Is(err, cmpp.ErrLength) {
		t.Errorf("length 11: %v", err)
	}
	if _, err := cmpp.ReadFrame(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff}), 100); !errors.Is(err, cmpp.ErrTooLarge) {
		t.Errorf("length 4G: %v", err)
	}
	if _, err := cmpp.ReadFrame(bytes.NewReader(b[:20]), 4096); err == nil {
		t.Error("truncated frame read without error")
	}
}

func expectErr(t *testing.T, name string, v cmpp.Version, b []byte, want error) {
	t.Helper()
	if _, _, err := cmpp.Decode(v, b); !errors.Is(err, want) {
		t.Errorf("%s: err %v, want %v", name, err, want)
	}
}

func mustEncode(t testing.TB, v cmpp.Version, p cmpp.PDU) []byte {
	t.Helper()
	b, err := cmpp.Encode(v, 1, p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// frame builds a PDU from a command id and a raw body.
func frame(cmd uint32, body []byte) []byte {
	b := make([]byte, 12, 12+len(body))
	setU32(b, 4, cmd)
	setU32(b, 8, 1)
	return withLength(append(b, body...))
}

// withLength rewrites Total_Length to the slice's length.
func withLength(b []byte) []byte {
	b = bytes.Clone(b)
	return setU32(b, 0, uint32(len(b)))
}

func setU32(b []byte, off int, v uint32) []byte {
	b[off], b[off+1], b[off+2], b[off+3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
	return b
}

// Offsets into encoded PDUs (header included) for corrupting fields.
func destCountOffset(v cmpp.Version) int {
	if v == cmpp.V30 {
		return 12 + 128
	}
	return 12 + 116
}

func registeredOffset(v cmpp.Version) int {
	if v == cmpp.V30 {
		return 12 + 8 + 21 + 10 + 3 + 32 + 1
	}
	return 12 + 8 + 21 + 10 + 3 + 21
}

func tailLen(v cmpp.Version) int {
	if v == cmpp.V30 {
		return 20
	}
	return 8
}
