package smpp_test

import (
	"bytes"
	"testing"

	"github.com/linxGnu/gosmpp/data"
	"github.com/linxGnu/gosmpp/pdu"

	"github.com/keelwork/keel/modules/delivery/smpp"
)

// marshal packs a gosmpp PDU as gosmpp puts it on the wire.
func marshal(p pdu.PDU) []byte {
	buf := pdu.NewBuffer(nil)
	p.Marshal(buf)
	return buf.Bytes()
}

// gosmppPDUs are the customer library's encodings of everything an ESME
// sends us; they also seed FuzzDecode.
func gosmppPDUs(t testing.TB) map[string]pdu.PDU {
	bind := pdu.NewBindRequest(pdu.Transceiver)
	bind.SystemID, bind.Password, bind.SystemType = "esme1", "secret1", "VMA"
	submit := pdu.NewSubmitSM().(*pdu.SubmitSM)
	submit.SourceAddr, _ = pdu.NewAddressWithTonNpiAddr(5, 0, "KEEL")
	submit.DestAddr, _ = pdu.NewAddressWithTonNpiAddr(1, 1, "8613500002696")
	submit.Message, _ = pdu.NewShortMessageWithEncoding("你好", data.UCS2)
	submit.RegisteredDelivery = 1
	submit.RegisterOptionalParam(pdu.Field{Tag: pdu.TagUserMessageReference, Data: []byte{0, 7}})
	nack := pdu.NewGenericNack()
	nack.(*pdu.GenericNack).CommandStatus = data.ESME_RINVCMDLEN
	refused := pdu.NewDeliverSMResp()
	refused.(*pdu.DeliverSMResp).CommandStatus = data.ESME_RX_T_APPN
	return map[string]pdu.PDU{
		"bind_transceiver": bind, "bind_receiver": pdu.NewBindReceiver(), "submit_sm": submit,
		"deliver_sm_resp": pdu.NewDeliverSMResp(), "deliver_sm_resp_refused": refused,
		"enquire_link": pdu.NewEnquireLink(), "enquire_link_resp": pdu.NewEnquireLinkResp(),
		"unbind": pdu.NewUnbind(), "unbind_resp": pdu.NewUnbindResp(), "generic_nack": nack,
	}
}

// What gosmpp sends decodes, with the fields it set, and re-encodes to
// its bytes.
func TestInteropDecodeGosmpp(t *testing.T) {
	for name, p := range gosmppPDUs(t) {
		b := marshal(p)
		h, got, err := smpp.Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if h.Seq != uint32(p.GetSequenceNumber()) || uint32(h.Command) != uint32(p.GetHeader().CommandID) {
			t.Errorf("%s: header %+v", name, h)
		}
		if again := mustEncode(t, h.Seq, got); !bytes.Equal(again, b) {
			t.Errorf("%s: re-encoded\n%x\ngosmpp\n%x", name, again, b)
		}
	}
	_, got, _ := smpp.Decode(marshal(gosmppPDUs(t)["submit_sm"]))
	s := got.(*smpp.SubmitSM)
	if s.DataCoding != 8 || string(s.ShortMessage) != "\x4f\x60\x59\x7d" || s.Dest.Addr != "8613500002696" {
		t.Errorf("submit_sm decoded as %+v", s)
	}
	if ref, _ := s.TLVs.Get(smpp.TagUserMessageRef); !bytes.Equal(ref, []byte{0, 7}) {
		t.Errorf("user_message_reference %x", ref)
	}
}

// What the server sends parses in gosmpp, field by field.
func TestInteropEncodeForGosmpp(t *testing.T) {
	parse := func(p smpp.PDU) pdu.PDU {
		t.Helper()
		got, err := pdu.Parse(bytes.NewReader(mustEncode(t, 9, p)))
		if err != nil {
			t.Fatalf("gosmpp cannot parse our %s: %v", p.Command(), err)
		}
		return got
	}
	d := parse(sampleReceipt(t)).(*pdu.DeliverSM)
	text, _ := d.Message.GetMessageData()
	rid := d.OptionalParameters[pdu.TagReceiptedMessageID]
	if d.EsmClass != 4 || !bytes.HasPrefix(text, []byte("id:0007000652a1b2c3d4e5 sub:001")) || rid.String() != "0007000652a1b2c3d4e5" {
		t.Errorf("receipt read as %+v", d)
	}
	r := parse(&smpp.SubmitSMResp{MessageID: "abc"}).(*pdu.SubmitSMResp)
	if r.MessageID != "abc" || r.SequenceNumber != 9 {
		t.Errorf("submit_sm_resp read as %+v", r)
	}
	if r := parse(&smpp.SubmitSMResp{Status: smpp.StatusThrottled}).(*pdu.SubmitSMResp); r.CommandStatus != data.ESME_RTHROTTLED {
		t.Errorf("refusing submit_sm_resp read as %+v", r)
	}
	for _, bt := range bindTypes {
		resp := parse(&smpp.BindResp{Type: bt.ours, SystemID: "keel"}).(*pdu.BindResp)
		if resp.SystemID != "keel" {
			t.Errorf("%s bind_resp read as %+v", bt.ours, resp)
		}
	}
	for _, p := range []smpp.PDU{&smpp.EnquireLink{}, &smpp.EnquireLinkResp{}, &smpp.Unbind{}, &smpp.UnbindResp{}, &smpp.GenericNack{Status: 3}} {
		if got := parse(p); uint32(got.GetHeader().CommandID) != uint32(p.Command()) {
			t.Errorf("%s read as %T", p.Command(), got)
		}
	}
}
