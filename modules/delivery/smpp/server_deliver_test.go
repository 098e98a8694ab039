package smpp_test

import (
	"context"
	"errors"
	"testing"

	"github.com/linxGnu/gosmpp/data"
	"github.com/linxGnu/gosmpp/pdu"

	"github.com/keelwork/keel/modules/delivery/smpp"
)

// A receipt for a submitted message reaches gosmpp with esm_class 0x04,
// the appendix B text and both TLVs; gosmpp's deliver_sm_resp reaches
// the handler.
func TestDeliverReceipt(t *testing.T) {
	srv, rec := startServer(t, nil)
	e := mustDial(t, srv, pdu.Transceiver)
	conn := next(t, rec.connected, "Connected")
	e.send(gosmppSubmit(t))
	id := next(t, rec.submits, "Submit").id
	recvAs[*pdu.SubmitSMResp](e)

	r := &smpp.Receipt{ID: id, Submitted: 1, Delivered: 1, SubmitDate: "2608141530",
		DoneDate: "2608141532", Stat: smpp.StatDelivered, Text: "你好 hello world, more than twenty bytes"}
	d, err := r.DeliverSM(smpp.Address{TON: 1, NPI: 1, Addr: "8613500002696"}, smpp.Address{TON: 5, Addr: "KEEL"})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := conn.Deliver(t.Context(), d)
	if err != nil {
		t.Fatal(err)
	}
	got := recvAs[*pdu.DeliverSM](e)
	text, _ := got.Message.GetMessageData()
	want := "id:" + id + " sub:001 dlvrd:001 submit date:2608141530 done date:2608141532 stat:DELIVRD err:000 text:你好 hello world, "
	if uint32(got.SequenceNumber) != seq || got.EsmClass != 0x04 || string(text) != want {
		t.Errorf("seq %d/%d esm_class %#x text\n%q\nwant\n%q", got.SequenceNumber, seq, got.EsmClass, text, want)
	}
	rid, state := got.OptionalParameters[pdu.TagReceiptedMessageID], got.OptionalParameters[pdu.TagMessageStateOption]
	if rid.String() != id || len(state.Data) != 1 || state.Data[0] != byte(smpp.StateDelivered) ||
		got.SourceAddr.Address() != "8613500002696" || got.DestAddr.Address() != "KEEL" {
		t.Errorf("receipted_message_id %q message_state %v source %q dest %q", rid.String(), state.Data,
			got.SourceAddr.Address(), got.DestAddr.Address())
	}
	parsed, err := smpp.ParseReceiptText(string(text))
	if err != nil || parsed.Stat != "DELIVRD" || parsed.ID != id {
		t.Errorf("stat text parsed as %+v (%v)", parsed, err)
	}
	e.ack(got, 0)
	if ack := next(t, rec.acks, "DeliverResp"); ack.seq != seq || ack.resp.Status != 0 || ack.conn != conn {
		t.Errorf("ack %+v resp %+v", ack, ack.resp)
	}
	if conn.InFlight() != 0 {
		t.Errorf("in flight %d after the ack", conn.InFlight())
	}
}

// An MO message keeps its data_coding and bytes.
func TestDeliverMO(t *testing.T) {
	srv, rec := startServer(t, nil)
	e := mustDial(t, srv, pdu.Receiver)
	conn := next(t, rec.connected, "Connected")
	seq, err := conn.Deliver(t.Context(), sampleMO())
	if err != nil {
		t.Fatal(err)
	}
	got := recvAs[*pdu.DeliverSM](e)
	content, _ := got.Message.GetMessageData()
	if uint32(got.SequenceNumber) != seq || got.Message.Encoding().DataCoding() != 8 || string(content) != "\x4f\x60\x59\x7d" ||
		got.SourceAddr.Ton() != 1 || got.SourceAddr.Address() != "8613500002696" || got.EsmClass != 0 {
		t.Errorf("gosmpp read %+v content %x", got, content)
	}
	e.ack(got, 0)
	next(t, rec.acks, "DeliverResp")
}

// Responses are matched by sequence number in any order; refusing
// statuses (and a generic_nack) reach the handler as sent; a duplicate
// matches nothing.
func TestDeliverRespStatuses(t *testing.T) {
	srv, rec := startServer(t, nil)
	e := mustDial(t, srv, pdu.Transceiver)
	conn := next(t, rec.connected, "Connected")
	var ds [3]*pdu.DeliverSM
	for i := range ds {
		if _, err := conn.Deliver(t.Context(), sampleMO()); err != nil {
			t.Fatal(err)
		}
		ds[i] = recvAs[*pdu.DeliverSM](e)
	}
	e.ack(ds[2], 0)
	e.ack(ds[0], smpp.StatusXTAppn)
	nack := pdu.NewGenericNack()
	nack.SetSequenceNumber(ds[1].SequenceNumber)
	nack.(*pdu.GenericNack).CommandStatus = data.ESME_RINVCMDLEN
	e.send(nack)
	for i, want := range []struct{ seq, status int32 }{{ds[2].SequenceNumber, 0},
		{ds[0].SequenceNumber, 0x64}, {ds[1].SequenceNumber, 0x02}} {
		ack := next(t, rec.acks, "DeliverResp")
		if ack.seq != uint32(want.seq) || ack.resp.Status != uint32(want.status) {
			t.Errorf("ack %d: seq %d status %s", i, ack.seq, smpp.StatusName(ack.resp.Status))
		}
	}
	e.ack(ds[0], 0) // a duplicate
	e.send(pdu.NewEnquireLink())
	recvAs[*pdu.EnquireLinkResp](e) // the duplicate was read before this
	none(t, rec.acks, "DeliverResp for a duplicate")
	none(t, rec.late, "late ack for a duplicate")
}

// A transmitter bind may not be sent deliver_sm.
func TestDeliverOnTransmitterBind(t *testing.T) {
	srv, rec := startServer(t, nil)
	mustDial(t, srv, pdu.Transmitter)
	conn := next(t, rec.connected, "Connected")
	if _, err := conn.Deliver(t.Context(), sampleMO()); !errors.Is(err, smpp.ErrNotReceiver) {
		t.Errorf("Deliver on a transmitter: %v", err)
	}
}

// An ESME bound below 3.4 gets the receipt without TLVs; the caller's
// PDU keeps them.
func TestDeliverPre34DropsTLVs(t *testing.T) {
	srv, rec := startServer(t, nil)
	r := dialRaw(t, srv)
	r.send(1, &smpp.Bind{Type: smpp.BindReceiver, SystemID: "esme1", Password: "secret1", InterfaceVersion: 0x33})
	r.expect(smpp.CmdBindReceiverResp, smpp.StatusOK, 1)
	conn := next(t, rec.connected, "Connected")
	d := sampleReceipt(t)
	seq, err := conn.Deliver(t.Context(), d)
	if err != nil {
		t.Fatal(err)
	}
	got := r.expect(smpp.CmdDeliverSM, 0, seq).(*smpp.DeliverSM)
	if got.TLVs != nil || len(d.TLVs) != 2 {
		t.Errorf("sent TLVs %v, caller's now %v", got.TLVs, d.TLVs)
	}
	if rc, err := got.Receipt(); err != nil || rc.State != smpp.StateDelivered {
		t.Errorf("receipt from text only: %+v (%v)", rc, err)
	}
}

func TestDeliverAfterDisconnect(t *testing.T) {
	srv, rec := startServer(t, nil)
	e := mustDial(t, srv, pdu.Transceiver)
	conn := next(t, rec.connected, "Connected")
	e.sess.Close()
	next(t, rec.disconnected, "Disconnected")
	<-conn.Done()
	if _, err := conn.Deliver(t.Context(), sampleMO()); !errors.Is(err, smpp.ErrConnClosed) {
		t.Errorf("Deliver after disconnect: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := conn.Deliver(ctx, sampleMO()); !errors.Is(err, context.Canceled) {
		t.Errorf("Deliver with cancelled ctx: %v", err)
	}
}
