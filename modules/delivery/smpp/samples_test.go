package smpp_test

import (
	"encoding/binary"
	"testing"

	"github.com/keelwork/keel/modules/delivery/smpp"
)

func sampleSubmit() *smpp.SubmitSM {
	return &smpp.SubmitSM{Message: smpp.Message{
		ServiceType: "CMT", Source: smpp.Address{TON: 5, NPI: 0, Addr: "KEEL"},
		Dest: smpp.Address{TON: 1, NPI: 1, Addr: "8613500002696"}, ESMClass: smpp.ESMClassUDHI,
		ProtocolID: 0, PriorityFlag: 1, ScheduleDeliveryTime: "260814153000004+",
		ValidityPeriod: "000001000000000R", RegisteredDelivery: 1, DataCoding: 8,
		ShortMessage: []byte("\x05\x00\x03\x01\x02\x01\x4f\x60"),
		TLVs:         smpp.TLVs{{Tag: smpp.TagUserMessageRef, Value: []byte{0, 9}}, {Tag: 0x1400, Value: []byte("vendor")}},
	}}
}

func sampleMO() *smpp.DeliverSM {
	return &smpp.DeliverSM{Message: smpp.Message{
		Source: smpp.Address{TON: 1, NPI: 1, Addr: "8613500002696"}, Dest: smpp.Address{Addr: "106900"},
		DataCoding: 8, ShortMessage: []byte("\x4f\x60\x59\x7d"),
	}}
}

func sampleReceipt(t testing.TB) *smpp.DeliverSM {
	t.Helper()
	r := &smpp.Receipt{ID: "0007000652a1b2c3d4e5", Submitted: 1, Delivered: 1,
		SubmitDate: "2608141530", DoneDate: "2608141532", Stat: smpp.StatDelivered, Text: "hello"}
	d, err := r.DeliverSM(smpp.Address{TON: 1, NPI: 1, Addr: "8613500002696"}, smpp.Address{Addr: "KEEL"})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// samplePDUs has one of every PDU type the codec handles.
func samplePDUs(t testing.TB) []smpp.PDU {
	return []smpp.PDU{
		&smpp.Bind{Type: smpp.BindTransceiver, SystemID: "esme1", Password: "secret1", SystemType: "VMA",
			InterfaceVersion: 0x34, AddrTON: 1, AddrNPI: 1, AddressRange: "^86"},
		&smpp.Bind{Type: smpp.BindReceiver}, &smpp.Bind{Type: smpp.BindTransmitter, SystemID: "x"},
		&smpp.BindResp{Type: smpp.BindTransceiver, SystemID: "keel",
			TLVs: smpp.TLVs{{Tag: smpp.TagSCInterfaceVersion, Value: []byte{0x34}}}},
		&smpp.BindResp{Type: smpp.BindTransmitter, Status: smpp.StatusInvPaswd},
		&smpp.BindResp{Type: smpp.BindTransceiver, Status: smpp.StatusInvSysID, SystemID: "keel"},
		&smpp.Unbind{}, &smpp.UnbindResp{}, &smpp.EnquireLink{}, &smpp.EnquireLinkResp{},
		&smpp.GenericNack{Status: smpp.StatusInvCmdID},
		sampleSubmit(), &smpp.SubmitSM{},
		&smpp.SubmitSMResp{MessageID: "0007000652a1b2c3d4e5"}, &smpp.SubmitSMResp{Status: smpp.StatusThrottled},
		sampleMO(), sampleReceipt(t),
		&smpp.DeliverSMResp{}, &smpp.DeliverSMResp{Status: smpp.StatusXTAppn},
	}
}

func mustEncode(t testing.TB, seq uint32, p smpp.PDU) []byte {
	t.Helper()
	b, err := smpp.Encode(seq, p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// frame builds a PDU from a command id, a sequence number and a raw body.
func frame(cmd, seq uint32, body []byte) []byte {
	b := make([]byte, smpp.HeaderLen, smpp.HeaderLen+len(body))
	binary.BigEndian.PutUint32(b[4:], cmd)
	binary.BigEndian.PutUint32(b[12:], seq)
	return withLength(append(b, body...))
}

// withLength rewrites command_length to the slice's length.
func withLength(b []byte) []byte {
	binary.BigEndian.PutUint32(b, uint32(len(b)))
	return b
}
