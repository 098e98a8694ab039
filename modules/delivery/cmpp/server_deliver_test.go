package cmpp_test

import (
	"context"
	"errors"
	"testing"

	gocmpp "github.com/bigwhite/gocmpp"

	"github.com/keelwork/keel/modules/delivery/cmpp"
)

func report(msgID cmpp.MsgID) *cmpp.Deliver {
	return &cmpp.Deliver{
		DestID: "1069000001", ServiceID: "TEST", SrcTerminalID: "13500002696",
		Report: &cmpp.Report{
			MsgID: msgID, Stat: cmpp.StatUndeliv, SubmitTime: "2608141530", DoneTime: "2608141532",
			DestTerminalID: "13500002696", SMSCSequence: 42,
		},
	}
}

// A status report reaches gocmpp in the layout the account asks for:
// 60 bytes on 2.0 and for the compatibility switch, 71 bytes on 3.0.
func TestDeliverReportLayouts(t *testing.T) {
	srv, rec := startServer(t, nil)
	cases := []struct {
		typ     gocmpp.Type
		account string
		wantLen int
	}{
		{gocmpp.V20, "901234", cmpp.ReportLen20},
		{gocmpp.V30, "901234", cmpp.ReportLen30},
		{gocmpp.V30, "902000", cmpp.ReportLen20},
		{gocmpp.V20, "903000", cmpp.ReportLen30},
	}
	for _, tc := range cases {
		t.Run(tc.typ.String()+"/"+tc.account, func(t *testing.T) {
			c := mustDial(t, srv, tc.typ, tc.account)
			conn := next(t, rec.connected, "Connected")
			original := conn.NewMsgID()
			d := report(original)
			seq, err := conn.Deliver(t.Context(), d)
			if err != nil {
				t.Fatal(err)
			}
			if d.MsgID == 0 || d.MsgID == original || d.Report.Layout != 0 {
				t.Errorf("outer msg id %s (original %s), caller's layout changed to %s", d.MsgID, original, d.Report.Layout)
			}
			got := c.readReport(t, seq, d.MsgID, tc.wantLen)
			if got.MsgId != uint64(original) || got.Stat != "UNDELIV" || got.SubmitTime != "2608141530" ||
				got.DoneTime != "2608141532" || got.DestTerminalId != "13500002696" {
				t.Errorf("gocmpp read %+v", got)
			}
			ours, err := cmpp.DecodeReport([]byte(c.lastContent))
			if err != nil || ours.SMSCSequence != 42 || ours.MsgID != original {
				t.Errorf("our decoder read %+v (%v)", ours, err)
			}
			if tc.wantLen == cmpp.ReportLen20 && got.SmscSequence != 42 {
				t.Errorf("60-byte SMSC_sequence read by gocmpp as %d", got.SmscSequence)
			}
			c.ack(seq, uint64(d.MsgID), 0)
			ack := next(t, rec.acks, "DeliverResp")
			if ack.seq != seq || ack.resp.Result != 0 || ack.resp.MsgID != d.MsgID || ack.conn != conn {
				t.Errorf("ack %+v resp %+v", ack, ack.resp)
			}
		})
	}
}

// readReport reads a report DELIVER and parses its content with gocmpp's
// receipt codec (which always uses the 60-byte layout).
func (c *client) readReport(t *testing.T, seq uint32, outer cmpp.MsgID, wantLen int) *gocmpp.CmppReceiptPkt {
	t.Helper()
	var gotSeq uint32
	var msgID uint64
	var registered, length uint8
	switch p := c.recv().(type) {
	case *gocmpp.Cmpp2DeliverReqPkt:
		gotSeq, msgID, registered, length, c.lastContent = p.SeqId, p.MsgId, p.RegisterDelivery, p.MsgLength, p.MsgContent
	case *gocmpp.Cmpp3DeliverReqPkt:
		gotSeq, msgID, registered, length, c.lastContent = p.SeqId, p.MsgId, p.RegisterDelivery, p.MsgLength, p.MsgContent
	default:
		t.Fatalf("got %T, want DELIVER", p)
	}
	if gotSeq != seq || msgID != uint64(outer) || registered != 1 || int(length) != wantLen {
		t.Fatalf("deliver seq %d/%d msgID %d/%d registered %d length %d/%d", gotSeq, seq, msgID, outer, registered, length, wantLen)
	}
	r := &gocmpp.CmppReceiptPkt{}
	if err := r.Unpack([]byte(c.lastContent)); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDeliverMO(t *testing.T) {
	srv, rec := startServer(t, nil)
	for _, typ := range []gocmpp.Type{gocmpp.V20, gocmpp.V30} {
		c := mustDial(t, srv, typ, "901234")
		conn := next(t, rec.connected, "Connected")
		d := &cmpp.Deliver{DestID: "10690000011", ServiceID: "TEST", MsgFmt: cmpp.FmtUCS2,
			SrcTerminalID: "13500002696", Content: []byte("\x4f\x60\x59\x7d")}
		seq, err := conn.Deliver(t.Context(), d)
		if err != nil {
			t.Fatal(err)
		}
		var got [6]any
		switch p := c.recv().(type) {
		case *gocmpp.Cmpp2DeliverReqPkt:
			got = [6]any{p.SeqId, p.DestId, p.MsgFmt, p.SrcTerminalId, p.RegisterDelivery, p.MsgContent}
		case *gocmpp.Cmpp3DeliverReqPkt:
			got = [6]any{p.SeqId, p.DestId, p.MsgFmt, p.SrcTerminalId, p.RegisterDelivery, p.MsgContent}
		}
		want := [6]any{seq, "10690000011", uint8(8), "13500002696", uint8(0), "\x4f\x60\x59\x7d"}
		if got != want {
			t.Errorf("%s: gocmpp read %v, want %v", typ, got, want)
		}
		c.ack(seq, uint64(d.MsgID), 0)
		next(t, rec.acks, "DeliverResp")
	}
}

// ACKs are matched by sequence id in any order, negative results reach
// the handler as they are, and each ACK frees its slot.
func TestDeliverAcksOutOfOrderAndRejected(t *testing.T) {
	srv, rec := startServer(t, nil)
	c := mustDial(t, srv, gocmpp.V20, "901234")
	conn := next(t, rec.connected, "Connected")
	var seqs [3]uint32
	var ids [3]uint64
	for i := range seqs {
		if _, err := conn.Deliver(t.Context(), report(conn.NewMsgID())); err != nil {
			t.Fatal(err)
		}
		seqs[i], ids[i] = c.deliverSeq()
	}
	if conn.InFlight() != 3 {
		t.Fatalf("in flight %d", conn.InFlight())
	}
	c.ack(seqs[2], ids[2], 0)
	c.ack(seqs[0], ids[0], uint32(cmpp.ResultFlowControl))
	c.ack(seqs[1], ids[0], 9) // echoes the wrong Msg_Id: still matched by seq, logged
	for i, want := range []struct {
		seq    uint32
		result uint32
		id     uint64
	}{{seqs[2], 0, ids[2]}, {seqs[0], 8, ids[0]}, {seqs[1], 9, ids[0]}} {
		ack := next(t, rec.acks, "DeliverResp")
		if ack.seq != want.seq || ack.resp.Result != want.result || uint64(ack.resp.MsgID) != want.id {
			t.Errorf("ack %d: seq %d result %d msgID %d", i, ack.seq, ack.resp.Result, ack.resp.MsgID)
		}
	}
	if conn.InFlight() != 0 {
		t.Errorf("in flight %d after all ACKs", conn.InFlight())
	}
	c.ack(seqs[0], ids[0], 0) // a duplicate ACK matches nothing
	none(t, rec.late, "late ack for a duplicate")
}

func TestDeliverAfterDisconnect(t *testing.T) {
	srv, rec := startServer(t, nil)
	c := mustDial(t, srv, gocmpp.V30, "901234")
	conn := next(t, rec.connected, "Connected")
	c.send(&gocmpp.CmppTerminateReqPkt{})
	next(t, rec.disconnected, "Disconnected")
	<-conn.Done()
	if _, err := conn.Deliver(t.Context(), report(1)); !errors.Is(err, cmpp.ErrConnClosed) {
		t.Errorf("Deliver after disconnect: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := conn.Deliver(ctx, report(1)); !errors.Is(err, context.Canceled) {
		t.Errorf("Deliver with cancelled ctx: %v", err)
	}
}
