package smpp_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/keelwork/keel/modules/delivery/smpp"
)

func TestReceiptRoundTrip(t *testing.T) {
	d := sampleReceipt(t)
	want := "id:0007000652a1b2c3d4e5 sub:001 dlvrd:001 submit date:2608141530 done date:2608141532 stat:DELIVRD err:000 text:hello"
	if string(d.ShortMessage) != want || d.ESMClass != smpp.ESMClassReceipt || d.DataCoding != 0 {
		t.Fatalf("receipt deliver_sm %+v\n%s", d, d.ShortMessage)
	}
	r, err := d.Receipt()
	if err != nil {
		t.Fatal(err)
	}
	exp := &smpp.Receipt{ID: "0007000652a1b2c3d4e5", Submitted: 1, Delivered: 1, SubmitDate: "2608141530",
		DoneDate: "2608141532", Stat: "DELIVRD", Err: "000", Text: "hello", State: smpp.StateDelivered}
	if !reflect.DeepEqual(r, exp) {
		t.Errorf("parsed %+v", r)
	}
}

// Receipts from other SMSCs vary in case, field set and date width; the
// text: field may contain anything.
func TestParseReceiptVariants(t *testing.T) {
	cases := map[string]smpp.Receipt{
		"id:ABC sub:000 dlvrd:000 submit date:260814153012 done date:260814153559 stat:UNDELIV err:034 Text:stat:DELIVRD id:x": {
			ID: "ABC", SubmitDate: "260814153012", DoneDate: "260814153559", Stat: "UNDELIV", Err: "034",
			Text: "stat:DELIVRD id:x", State: smpp.StateUndeliverable},
		"ID:42 STAT:EXPIRED":            {ID: "42", Stat: "EXPIRED", State: smpp.StateExpired},
		"id:7 stat:MA:0001 err:1 text:": {ID: "7", Stat: "MA:0001", Err: "1", State: smpp.StateUnknown},
	}
	for text, want := range cases {
		got, err := smpp.ParseReceiptText(text)
		if err != nil || !reflect.DeepEqual(*got, want) {
			t.Errorf("%q: %+v (%v)\nwant %+v", text, got, err, want)
		}
	}
	for _, bad := range []string{"", "stat:DELIVRD", "id:1", "id:1 stat:X sub:abc", "id:1 stat:X dlvrd:1000", "xid:1 xstat:2"} {
		if _, err := smpp.ParseReceiptText(bad); !errors.Is(err, smpp.ErrMalformed) {
			t.Errorf("%q: %v, want ErrMalformed", bad, err)
		}
	}
}

// The TLVs win over the text; a non-receipt is refused.
func TestReceiptTLVsAndKind(t *testing.T) {
	d := sampleReceipt(t)
	d.TLVs.Set(smpp.TagReceiptedMessageID, smpp.CStringValue("from-tlv"))
	d.TLVs.Set(smpp.TagMessageState, []byte{byte(smpp.StateRejected)})
	if r, err := d.Receipt(); err != nil || r.ID != "from-tlv" || r.State != smpp.StateRejected || r.Stat != "DELIVRD" {
		t.Errorf("receipt %+v (%v)", r, err)
	}
	if _, err := sampleMO().Receipt(); !errors.Is(err, smpp.ErrNotReceipt) {
		t.Errorf("MO as receipt: %v", err)
	}
}

func TestReceiptRejects(t *testing.T) {
	ok := smpp.Receipt{ID: "1", SubmitDate: "2608141530", DoneDate: "2608141530", Stat: "DELIVRD"}
	for name, change := range map[string]func(*smpp.Receipt){
		"empty id":   func(r *smpp.Receipt) { r.ID = "" },
		"id space":   func(r *smpp.Receipt) { r.ID = "a b" },
		"long id":    func(r *smpp.Receipt) { r.ID = strings.Repeat("f", 65) },
		"sub":        func(r *smpp.Receipt) { r.Submitted = 1000 },
		"dlvrd":      func(r *smpp.Receipt) { r.Delivered = -1 },
		"date":       func(r *smpp.Receipt) { r.DoneDate = "26081415" },
		"date chars": func(r *smpp.Receipt) { r.SubmitDate = "26081415x0" },
		"stat":       func(r *smpp.Receipt) { r.Stat = "DELIVERED" },
		"err":        func(r *smpp.Receipt) { r.Err = "0000" },
	} {
		r := ok
		change(&r)
		if _, err := r.DeliverSM(smpp.Address{}, smpp.Address{}); !errors.Is(err, smpp.ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ok.DeliverSM(smpp.Address{}, smpp.Address{}); err != nil {
		t.Errorf("valid receipt: %v", err)
	}
}

// text: is cut to 20 bytes without splitting a character.
func TestReceiptTextCut(t *testing.T) {
	r := smpp.Receipt{ID: "1", SubmitDate: "2608141530", DoneDate: "2608141530", Stat: "DELIVRD",
		Text: "ab你好你好你好你好你好"} // 2 + 3*10 bytes
	d, err := r.DeliverSM(smpp.Address{}, smpp.Address{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := d.Receipt(); got.Text != "ab你好你好你好" {
		t.Errorf("text %q", got.Text)
	}
}

func TestStates(t *testing.T) {
	for stat, want := range map[string]smpp.MessageState{
		"ENROUTE": 1, "DELIVRD": 2, "EXPIRED": 3, "DELETED": 4, "UNDELIV": 5, "ACCEPTD": 6,
		"UNKNOWN": 7, "REJECTD": 8, "MK:0001": 7, "": 7,
	} {
		if got := smpp.StateForStat(stat); got != want {
			t.Errorf("%q: %s, want %s", stat, got, want)
		}
	}
	if smpp.StateRejected.String() != "REJECTD" || smpp.MessageState(9).String() != "state(9)" {
		t.Error("state names")
	}
}
