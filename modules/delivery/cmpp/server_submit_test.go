package cmpp_test

import (
	"bytes"
	"testing"
	"time"

	gocmpp "github.com/bigwhite/gocmpp"

	"github.com/keelwork/keel/modules/delivery/cmpp"
)

func submitPkt(typ gocmpp.Type) gocmpp.Packer {
	if typ == gocmpp.V30 {
		return &gocmpp.Cmpp3SubmitReqPkt{
			RegisteredDelivery: 1, ServiceId: "TEST", FeeUserType: 2, MsgFmt: 8, MsgSrc: "901234",
			FeeType: "02", FeeCode: "10", SrcId: "1069000001", DestUsrTl: 1,
			DestTerminalId: []string{"13500002696"}, MsgLength: 4, MsgContent: "\x4f\x60\x59\x7d", LinkId: "L"}
	}
	return &gocmpp.Cmpp2SubmitReqPkt{
		RegisteredDelivery: 1, ServiceId: "TEST", FeeUserType: 2, MsgFmt: 8, MsgSrc: "901234",
		FeeType: "02", FeeCode: "10", SrcId: "1069000001", DestUsrTl: 1,
		DestTerminalId: []string{"13500002696"}, MsgLength: 4, MsgContent: "\x4f\x60\x59\x7d"}
}

// submitResp reads a SUBMIT_RESP in either layout.
func (c *client) submitResp() (seq uint32, msgID uint64, result uint32) {
	c.t.Helper()
	switch p := c.recv().(type) {
	case *gocmpp.Cmpp3SubmitRspPkt:
		return p.SeqId, p.MsgId, p.Result
	case *gocmpp.Cmpp2SubmitRspPkt:
		return p.SeqId, p.MsgId, uint32(p.Result)
	default:
		c.t.Fatalf("got %T, want SUBMIT_RESP", p)
	}
	return
}

// SUBMIT is answered with a server-allocated Msg_Id whose fields are the
// submit time in the configured zone and the gateway id.
func TestSubmitAssignsMsgID(t *testing.T) {
	srv, rec := startServer(t, nil)
	for _, typ := range []gocmpp.Type{gocmpp.V20, gocmpp.V30} {
		t.Run(typ.String(), func(t *testing.T) {
			c := mustDial(t, srv, typ, "901234")
			conn := next(t, rec.connected, "Connected")
			before := time.Now().In(testZone).Truncate(time.Second)
			seq := c.send(submitPkt(typ))
			call := next(t, rec.submits, "Submit")
			rseq, msgID, result := c.submitResp()
			after := time.Now().In(testZone)

			if rseq != seq || result != 0 || cmpp.MsgID(msgID) != call.msgID || call.conn != conn {
				t.Fatalf("resp seq %d/%d result %d msgID %d, handler saw %d", rseq, seq, result, msgID, call.msgID)
			}
			parts := call.msgID.Parts()
			at := call.msgID.Time(before.Year(), testZone)
			if parts.Gateway != testGateway || at.Before(before) || at.After(after) {
				t.Errorf("msg id %s (%+v) outside [%s, %s] or wrong gateway", call.msgID, parts, before, after)
			}
			s := call.s
			if s.RegisteredDelivery != 1 || s.MsgFmt != 8 || s.SrcID != "1069000001" ||
				len(s.DestTerminalIDs) != 1 || s.DestTerminalIDs[0] != "13500002696" ||
				!bytes.Equal(s.Content, []byte("\x4f\x60\x59\x7d")) {
				t.Errorf("handler got %+v", s)
			}
			w := next(t, rec.written, "SubmitRespWritten")
			if w.msgID != call.msgID || w.err != nil {
				t.Errorf("written %+v", w)
			}
		})
	}
}

// A handler's non-zero result goes back with the Msg_Id still set.
func TestSubmitRejectedKeepsMsgID(t *testing.T) {
	srv, rec := startServer(t, nil)
	rec.result.Store(uint32(cmpp.ResultFlowControl))
	c := mustDial(t, srv, gocmpp.V30, "901234")
	c.send(submitPkt(gocmpp.V30))
	call := next(t, rec.submits, "Submit")
	_, msgID, result := c.submitResp()
	if result != 8 || cmpp.MsgID(msgID) != call.msgID || msgID == 0 {
		t.Errorf("result %d msgID %d, handler msgID %d", result, msgID, call.msgID)
	}
}

// Sequence_Id 0 is a valid request id (gocmpp starts at 0), and a
// malformed SUBMIT is answered with a Result, not a dropped connection.
func TestSubmitSequenceZeroAndMalformed(t *testing.T) {
	srv, rec := startServer(t, nil)
	raw := dialRaw(t, srv, gocmpp.V30)
	if _, ok := raw.login("901234", gocmpp.V30).(*gocmpp.Cmpp3ConnRspPkt); !ok {
		t.Fatal("no 3.0 CONNECT_RESP")
	}
	next(t, rec.connected, "Connected")

	good, err := submitPkt(gocmpp.V30).Pack(0)
	if err != nil {
		t.Fatal(err)
	}
	bad := withLength(good[:len(good)-5]) // LinkID cut short
	setU32(bad, 8, 9)
	for _, b := range [][]byte{good, bad} {
		if _, err := raw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	resps := map[uint32]*gocmpp.Cmpp3SubmitRspPkt{}
	for range 2 {
		p, err := raw.RecvAndUnpackPkt(waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		r := p.(*gocmpp.Cmpp3SubmitRspPkt)
		resps[r.SeqId] = r
	}
	if r := resps[0]; r == nil || r.Result != 0 || r.MsgId == 0 {
		t.Errorf("seq 0: %+v", r)
	}
	if r := resps[9]; r == nil || r.Result != uint32(cmpp.ResultBadLength) {
		t.Errorf("malformed: %+v, want result 4", r)
	}
	if err := raw.SendPkt(&gocmpp.CmppActiveTestReqPkt{}, 10); err != nil {
		t.Fatal(err)
	}
	if p, err := raw.RecvAndUnpackPkt(waitLimit); err != nil {
		t.Fatalf("connection dropped after malformed submit: %v", err)
	} else if _, ok := p.(*gocmpp.CmppActiveTestRspPkt); !ok {
		t.Fatalf("got %T", p)
	}
}
