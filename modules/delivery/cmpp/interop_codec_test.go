package cmpp_test

import (
	"bytes"
	"reflect"
	"testing"

	gocmpp "github.com/bigwhite/gocmpp"

	"github.com/keelwork/keel/modules/delivery/cmpp"
)

// gocmpp packs what a customer sends; our decoder must read it and our
// encoder must reproduce it byte for byte.
func TestInteropDecodeClientPDUs(t *testing.T) {
	cases := []struct {
		v    cmpp.Version
		pack gocmpp.Packer
		want cmpp.PDU
	}{
		{cmpp.V20, &gocmpp.CmppConnReqPkt{SrcAddr: "9012", Secret: "s", Version: gocmpp.V20, Timestamp: 1021080510},
			&cmpp.Connect{SourceAddr: "9012", Version: cmpp.V20, Timestamp: 1021080510}},
		{cmpp.V30, &gocmpp.Cmpp3SubmitReqPkt{
			PkTotal: 1, PkNumber: 1, RegisteredDelivery: 1, ServiceId: "TEST", FeeUserType: 2,
			FeeTerminalId: "13500000000", FeeTerminalType: 1, MsgFmt: 8, MsgSrc: "901234", FeeType: "02",
			FeeCode: "10", SrcId: "1069000001", DestUsrTl: 2, DestTerminalId: []string{"13500002696", "138"},
			DestTerminalType: 1, MsgLength: 4, MsgContent: "\x4f\x60\x59\x7d", LinkId: "L1"},
			&cmpp.Submit{PkTotal: 1, PkNumber: 1, RegisteredDelivery: 1, ServiceID: "TEST", FeeUserType: 2,
				FeeTerminalID: "13500000000", FeeTerminalType: 1, MsgFmt: 8, MsgSrc: "901234", FeeType: "02",
				FeeCode: "10", SrcID: "1069000001", DestTerminalIDs: []string{"13500002696", "138"},
				DestTerminalType: 1, Content: []byte("\x4f\x60\x59\x7d"), LinkID: "L1"}},
		{cmpp.V20, &gocmpp.Cmpp2SubmitReqPkt{
			PkTotal: 1, PkNumber: 1, ServiceId: "T", FeeTerminalId: "135", MsgSrc: "901234",
			SrcId: "1069", DestUsrTl: 1, DestTerminalId: []string{"13500002696"}, MsgLength: 2, MsgContent: "hi"},
			&cmpp.Submit{PkTotal: 1, PkNumber: 1, ServiceID: "T", FeeTerminalID: "135", MsgSrc: "901234",
				SrcID: "1069", DestTerminalIDs: []string{"13500002696"}, Content: []byte("hi")}},
		{cmpp.V20, &gocmpp.Cmpp2DeliverRspPkt{MsgId: 77, Result: 8}, &cmpp.DeliverResp{MsgID: 77, Result: 8}},
		{cmpp.V30, &gocmpp.Cmpp3DeliverRspPkt{MsgId: 78, Result: 9}, &cmpp.DeliverResp{MsgID: 78, Result: 9}},
		{cmpp.V30, &gocmpp.CmppActiveTestReqPkt{}, &cmpp.ActiveTest{}},
		{cmpp.V30, &gocmpp.CmppActiveTestRspPkt{}, &cmpp.ActiveTestResp{}},
		{cmpp.V20, &gocmpp.CmppTerminateReqPkt{}, &cmpp.Terminate{}},
		{cmpp.V20, &gocmpp.CmppTerminateRspPkt{}, &cmpp.TerminateResp{}},
	}
	for _, c := range cases {
		b, err := c.pack.Pack(5)
		if err != nil {
			t.Fatal(err)
		}
		h, got, err := cmpp.Decode(c.v, b)
		if err != nil {
			t.Fatalf("%T: %v", c.pack, err)
		}
		if conn, ok := got.(*cmpp.Connect); ok {
			c.want.(*cmpp.Connect).AuthenticatorSource = conn.AuthenticatorSource
		}
		if h.Seq != 5 || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%T: seq %d decoded %+v\nwant %+v", c.pack, h.Seq, got, c.want)
		}
		if again := mustEncode(t, c.v, got); !bytes.Equal(again[12:], b[12:]) {
			t.Errorf("%T: re-encoding differs from gocmpp's bytes", c.pack)
		}
	}
}

// Our server-side PDUs unpacked by gocmpp, as a customer would.
func TestInteropEncodeServerPDUs(t *testing.T) {
	type unpacker interface{ Unpack([]byte) error }
	check := func(name string, b []byte, into unpacker, want any) {
		t.Helper()
		if err := into.Unpack(b[8:]); err != nil { // gocmpp unpacks from Sequence_Id on
			t.Fatalf("%s: gocmpp: %v", name, err)
		}
		if !reflect.DeepEqual(into, want) {
			t.Errorf("%s: gocmpp read %+v\nwant %+v", name, into, want)
		}
	}
	check("connect_resp 2.0", mustEncode(t, cmpp.V20, &cmpp.ConnectResp{Status: 3, Version: cmpp.V20}),
		&gocmpp.Cmpp2ConnRspPkt{}, &gocmpp.Cmpp2ConnRspPkt{Status: 3, AuthIsmg: string(make([]byte, 16)), Version: gocmpp.V20, SeqId: 1})
	check("connect_resp 3.0", mustEncode(t, cmpp.V30, &cmpp.ConnectResp{Status: 4, Version: cmpp.V30}),
		&gocmpp.Cmpp3ConnRspPkt{}, &gocmpp.Cmpp3ConnRspPkt{Status: 4, AuthIsmg: string(make([]byte, 16)), Version: gocmpp.V30, SeqId: 1})
	check("submit_resp 2.0", mustEncode(t, cmpp.V20, &cmpp.SubmitResp{MsgID: 99, Result: 8}),
		&gocmpp.Cmpp2SubmitRspPkt{}, &gocmpp.Cmpp2SubmitRspPkt{MsgId: 99, Result: 8, SeqId: 1})
	check("submit_resp 3.0", mustEncode(t, cmpp.V30, &cmpp.SubmitResp{MsgID: 99, Result: 13}),
		&gocmpp.Cmpp3SubmitRspPkt{}, &gocmpp.Cmpp3SubmitRspPkt{MsgId: 99, Result: 13, SeqId: 1})
	check("active_test_resp", mustEncode(t, cmpp.V30, &cmpp.ActiveTestResp{}),
		&gocmpp.CmppActiveTestRspPkt{}, &gocmpp.CmppActiveTestRspPkt{SeqId: 1})
	check("deliver mo 2.0", mustEncode(t, cmpp.V20, sampleMO(cmpp.V20)), &gocmpp.Cmpp2DeliverReqPkt{},
		&gocmpp.Cmpp2DeliverReqPkt{MsgId: 0x5000000000000001, DestId: "106900001234", ServiceId: "TEST", MsgFmt: 8,
			SrcTerminalId: "13500002696", MsgLength: 4, MsgContent: "\x4f\x60\x59\x7d", Reserve: "R", SeqId: 1})
	check("deliver mo 3.0", mustEncode(t, cmpp.V30, sampleMO(cmpp.V30)), &gocmpp.Cmpp3DeliverReqPkt{},
		&gocmpp.Cmpp3DeliverReqPkt{MsgId: 0x5000000000000001, DestId: "106900001234", ServiceId: "TEST", MsgFmt: 8,
			SrcTerminalId: "13500002696", SrcTerminalType: 1, MsgLength: 4, MsgContent: "\x4f\x60\x59\x7d", LinkId: "LINK-9", SeqId: 1})
}

// gocmpp's receipt codec is the 60-byte layout; both directions agree.
func TestInteropReport60(t *testing.T) {
	theirs := &gocmpp.CmppReceiptPkt{MsgId: 7, Stat: "UNDELIV", SubmitTime: "2608141530",
		DoneTime: "2608141531", DestTerminalId: "13500002696", SmscSequence: 42}
	b, err := theirs.Pack()
	if err != nil {
		t.Fatal(err)
	}
	r, err := cmpp.DecodeReport(b)
	if err != nil {
		t.Fatal(err)
	}
	want := &cmpp.Report{MsgID: 7, Stat: "UNDELIV", SubmitTime: "2608141530", DoneTime: "2608141531",
		DestTerminalID: "13500002696", SMSCSequence: 42, Layout: cmpp.V20}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("decoded %+v", r)
	}
}
