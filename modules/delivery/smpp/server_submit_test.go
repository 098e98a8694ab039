package smpp_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/linxGnu/gosmpp/data"
	"github.com/linxGnu/gosmpp/pdu"

	"github.com/keelwork/keel/modules/delivery/smpp"
)

// gosmppSubmit is a UCS-2 submit_sm asking for a receipt.
func gosmppSubmit(t *testing.T) *pdu.SubmitSM {
	t.Helper()
	s := pdu.NewSubmitSM().(*pdu.SubmitSM)
	s.SourceAddr = pdu.NewAddressWithTonNpi(5, 0)
	s.SourceAddr.SetAddress("KEEL")
	s.DestAddr = pdu.NewAddressWithTonNpi(1, 1)
	s.DestAddr.SetAddress("8613500002696")
	msg, err := pdu.NewShortMessageWithEncoding("你好", data.UCS2)
	if err != nil {
		t.Fatal(err)
	}
	s.Message, s.RegisteredDelivery = msg, 1
	return s
}

// submit_sm is answered with the message_id the handler was given, for
// both bind types that may submit.
func TestSubmitAssignsMessageID(t *testing.T) {
	srv, rec := startServer(t, nil)
	for _, typ := range []pdu.BindingType{pdu.Transmitter, pdu.Transceiver} {
		e := mustDial(t, srv, typ)
		conn := next(t, rec.connected, "Connected")
		seq := e.send(gosmppSubmit(t))
		call := next(t, rec.submits, "Submit")
		resp := recvAs[*pdu.SubmitSMResp](e)
		if uint32(resp.SequenceNumber) != seq || resp.CommandStatus != data.ESME_ROK ||
			resp.MessageID != call.id || len(call.id) != smpp.MessageIDLen || call.conn != conn {
			t.Fatalf("%v: resp seq %d/%d status %s id %q, handler id %q", typ, resp.SequenceNumber, seq,
				resp.CommandStatus, resp.MessageID, call.id)
		}
		s := call.s
		if s.Source != (smpp.Address{TON: 5, Addr: "KEEL"}) || s.Dest != (smpp.Address{TON: 1, NPI: 1, Addr: "8613500002696"}) ||
			s.DataCoding != 8 || s.RegisteredDelivery != 1 || !bytes.Equal(s.Content(), []byte("\x4f\x60\x59\x7d")) {
			t.Errorf("%v: handler got %+v", typ, s)
		}
		if w := next(t, rec.written, "SubmitRespWritten"); w.id != call.id || w.status != 0 || w.err != nil {
			t.Errorf("%v: written %+v", typ, w)
		}
	}
}

// A refusing status goes back without a message_id (no body), and the
// handler learns it was written.
func TestSubmitRejected(t *testing.T) {
	srv, rec := startServer(t, nil)
	rec.status.Store(smpp.StatusThrottled)
	e := mustDial(t, srv, pdu.Transceiver)
	e.send(gosmppSubmit(t))
	call := next(t, rec.submits, "Submit")
	resp := recvAs[*pdu.SubmitSMResp](e)
	if resp.CommandStatus != data.ESME_RTHROTTLED || resp.MessageID != "" || resp.CommandLength != smpp.HeaderLen {
		t.Errorf("resp %+v", resp)
	}
	if w := next(t, rec.written, "SubmitRespWritten"); w.id != call.id || w.status != smpp.StatusThrottled {
		t.Errorf("written %+v", w)
	}
}

// A receiver may not submit: ESME_RINVBNDSTS, and the handler is not
// called.
func TestSubmitOnReceiverBind(t *testing.T) {
	srv, rec := startServer(t, nil)
	e := mustDial(t, srv, pdu.Receiver)
	next(t, rec.connected, "Connected")
	seq := e.send(gosmppSubmit(t))
	resp := recvAs[*pdu.SubmitSMResp](e)
	if uint32(resp.SequenceNumber) != seq || resp.CommandStatus != data.ESME_RINVBNDSTS {
		t.Errorf("resp %+v", resp)
	}
	none(t, rec.submits, "Submit on a receiver bind")
}

// Malformed requests are answered with the status of the failed field
// and the session goes on; unknown and unsupported commands get
// generic_nack ESME_RINVCMDID; content may come in message_payload.
func TestSubmitMalformedAndUnknown(t *testing.T) {
	srv, rec := startServer(t, nil)
	r := dialRaw(t, srv)
	r.bind(smpp.BindTransceiver)
	next(t, rec.connected, "Connected")

	good := mustEncode(t, 10, sampleSubmit())
	longSource := bytes.Replace(good, []byte("KEEL\x00"), []byte("KEEL012345678901234567"), 1)
	r.write(withLength(longSource))
	r.expect(smpp.CmdSubmitSMResp, smpp.StatusInvSrcAdr, 10)
	r.write(withLength(append(good[:len(good):len(good)], 0x04, 0x27, 0, 2, 1, 2))) // message_state of 2 bytes
	r.expect(smpp.CmdSubmitSMResp, smpp.StatusInvParLen, 10)
	r.write(frame(0x00000099, 11, []byte{1, 2, 3}))
	r.expect(smpp.CmdGenericNack, smpp.StatusInvCmdID, 11)
	r.write(frame(uint32(smpp.CmdDataSM), 12, nil))
	r.expect(smpp.CmdGenericNack, smpp.StatusInvCmdID, 12)
	r.send(13, &smpp.DeliverSM{}) // the SMSC's command, not the ESME's
	r.expect(smpp.CmdGenericNack, smpp.StatusInvCmdID, 13)
	none(t, rec.submits, "Submit for a malformed PDU")

	long := make([]byte, 1000)
	r.send(14, &smpp.SubmitSM{Message: smpp.Message{TLVs: smpp.TLVs{{Tag: smpp.TagMessagePayload, Value: long}}}})
	if call := next(t, rec.submits, "Submit"); len(call.s.Content()) != 1000 {
		t.Errorf("message_payload of %d bytes", len(call.s.Content()))
	}
	r.expect(smpp.CmdSubmitSMResp, smpp.StatusOK, 14)
}

// A command_length outside the limits cannot be resynchronized: generic
// nack ESME_RINVCMDLEN, then the connection closes.
func TestBadCommandLengthCloses(t *testing.T) {
	srv, rec := startServer(t, nil)
	r := dialRaw(t, srv)
	r.bind(smpp.BindTransceiver)
	conn := next(t, rec.connected, "Connected")
	b := frame(uint32(smpp.CmdSubmitSM), 21, nil)
	b[0], b[1] = 0x7f, 0xff // command_length far above MaxPDUSize
	r.write(b)
	r.expect(smpp.CmdGenericNack, smpp.StatusInvCmdLen, 21)
	r.expectEOF()
	if d := next(t, rec.disconnected, "Disconnected"); d.conn != conn || !errors.Is(d.err, smpp.ErrTooLarge) {
		t.Errorf("disconnected with %v, want ErrTooLarge", d.err)
	}
}
