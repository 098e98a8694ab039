package smpp

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Receipt is a delivery receipt as SMPP 3.4 appendix B writes it in a
// deliver_sm's short_message:
//
//	id:ID sub:001 dlvrd:001 submit date:YYMMDDhhmm done date:YYMMDDhhmm stat:DELIVRD err:000 text:...
//
// plus the receipted_message_id and message_state TLVs, which ESMEs
// should prefer over the text.
type Receipt struct {
	ID         string       // the message_id submit_sm_resp returned; 1 to 64 bytes, no spaces
	Submitted  int          // sub: 0 to 999
	Delivered  int          // dlvrd: 0 to 999
	SubmitDate string       // YYMMDDhhmm (or YYMMDDhhmmss)
	DoneDate   string       // YYMMDDhhmm (or YYMMDDhhmmss)
	Stat       string       // DELIVRD, UNDELIV, ... at most 7 characters
	Err        string       // up to 3 characters; empty is written as 000
	Text       string       // the start of the message; cut to 20 bytes
	State      MessageState // 0 derives it from Stat
}

// ReceiptTimeLayout formats SubmitDate and DoneDate.
const ReceiptTimeLayout = "0601021504"

// maxReceiptText is the receipt's text: length, the format's "first 20
// characters" counted in bytes because the receipt is sent in the
// default alphabet.
const maxReceiptText = 20

// DeliverSM builds the receipt's deliver_sm. source is the handset the
// message went to, dest the address the ESME submitted from.
func (r *Receipt) DeliverSM(source, dest Address) (*DeliverSM, error) {
	n, err := r.normalized()
	if err != nil {
		return nil, err
	}
	d := &DeliverSM{Message{Source: source, Dest: dest, ESMClass: ESMClassReceipt}}
	d.ShortMessage = []byte(n.text())
	d.TLVs = TLVs{
		{Tag: TagReceiptedMessageID, Value: CStringValue(n.ID)},
		{Tag: TagMessageState, Value: []byte{uint8(n.State)}},
	}
	return d, nil
}

// normalized fills the defaults and checks every field, so a receipt is
// refused rather than written in a form ESMEs cannot parse.
func (r *Receipt) normalized() (Receipt, error) {
	n := *r
	if n.Err == "" {
		n.Err = "000"
	}
	if n.State == 0 {
		n.State = StateForStat(n.Stat)
	}
	n.Text = cutUTF8(n.Text, maxReceiptText)
	bad := func(f string, v any) (Receipt, error) {
		return Receipt{}, fmt.Errorf("%w: receipt %s %q", ErrMalformed, f, fmt.Sprint(v))
	}
	switch {
	case !token(n.ID, 64):
		return bad("id", n.ID)
	case n.Submitted < 0 || n.Submitted > 999 || n.Delivered < 0 || n.Delivered > 999:
		return bad("sub/dlvrd", fmt.Sprint(n.Submitted, "/", n.Delivered))
	case !receiptDate(n.SubmitDate) || !receiptDate(n.DoneDate):
		return bad("dates", n.SubmitDate+" "+n.DoneDate)
	case !token(n.Stat, 7):
		return bad("stat", n.Stat)
	case !token(n.Err, 3):
		return bad("err", n.Err)
	}
	return n, nil
}

func (r *Receipt) text() string {
	return fmt.Sprintf("id:%s sub:%03d dlvrd:%03d submit date:%s done date:%s stat:%s err:%s text:%s",
		r.ID, r.Submitted, r.Delivered, r.SubmitDate, r.DoneDate, r.Stat, r.Err, r.Text)
}

// token: 1 to max bytes with no space or NUL, so the text stays parsable.
func token(s string, max int) bool {
	return s != "" && len(s) <= max && !strings.ContainsAny(s, " \x00")
}

func receiptDate(s string) bool {
	if len(s) != 10 && len(s) != 12 {
		return false
	}
	return strings.Trim(s, "0123456789") == ""
}

// cutUTF8 shortens s to at most n bytes without splitting a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n-- // s[n] continues a character that the cut would split
	}
	return s[:n]
}
