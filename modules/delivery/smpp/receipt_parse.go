package smpp

import (
	"fmt"
	"strconv"
	"strings"
)

// Receipt parses a delivery receipt deliver_sm: the appendix B text, with
// receipted_message_id and message_state taking precedence over the text
// when present. It fails with ErrNotReceipt when the esm_class does not
// mark a receipt, ErrMalformed when id or stat is missing.
func (p *DeliverSM) Receipt() (*Receipt, error) {
	if p.ESMClass&ESMClassTypeMask != ESMClassReceipt {
		return nil, ErrNotReceipt
	}
	r, err := ParseReceiptText(string(p.ShortMessage))
	if err != nil {
		return nil, err
	}
	if id, ok := p.TLVs.CString(TagReceiptedMessageID); ok {
		r.ID = id
	}
	if st, ok := p.TLVs.Uint8(TagMessageState); ok {
		r.State = MessageState(st)
	}
	return r, nil
}

// receiptKeys are the fields before text:, in order.
var receiptKeys = []string{"id", "sub", "dlvrd", "submit date", "done date", "stat", "err"}

// ParseReceiptText reads the appendix B receipt text. Keys are matched
// without regard to case and may be missing, except id and stat; text:
// runs to the end. State is derived from Stat.
func ParseReceiptText(s string) (*Receipt, error) {
	fields := map[string]string{}
	if i := keyAt(s, "text"); i >= 0 {
		fields["text"] = s[i+len("text:"):]
		s = s[:i]
	}
	for _, k := range receiptKeys {
		if i := keyAt(s, k); i >= 0 {
			v := s[i+len(k)+1:]
			if j := strings.IndexByte(v, ' '); j >= 0 {
				v = v[:j]
			}
			fields[k] = v
		}
	}
	return receiptFrom(fields)
}

// keyAt finds "key:" at the start of s or after a space, ignoring ASCII
// case. It compares bytes, never lowercased copies, whose lengths could
// differ from s.
func keyAt(s, key string) int {
	want := key + ":"
	for i := 0; i+len(want) <= len(s); i++ {
		if (i == 0 || s[i-1] == ' ') && foldedPrefix(s[i:], want) {
			return i
		}
	}
	return -1
}

// foldedPrefix reports whether s starts with the lower-case ASCII want.
func foldedPrefix(s, want string) bool {
	for j := 0; j < len(want); j++ {
		c := s[j]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != want[j] {
			return false
		}
	}
	return true
}

func receiptFrom(f map[string]string) (*Receipt, error) {
	r := &Receipt{ID: f["id"], SubmitDate: f["submit date"], DoneDate: f["done date"],
		Stat: f["stat"], Err: f["err"], Text: f["text"]}
	if r.ID == "" || r.Stat == "" {
		return nil, fmt.Errorf("%w: receipt text without id or stat", ErrMalformed)
	}
	var err error
	if r.Submitted, err = receiptCount(f, "sub"); err != nil {
		return nil, err
	}
	if r.Delivered, err = receiptCount(f, "dlvrd"); err != nil {
		return nil, err
	}
	r.State = StateForStat(r.Stat)
	return r, nil
}

func receiptCount(f map[string]string, key string) (int, error) {
	v, ok := f[key]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 999 {
		return 0, fmt.Errorf("%w: receipt %s:%q", ErrMalformed, key, v)
	}
	return n, nil
}
