package payment

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseYuan: an amount typed by an operator is either refused or a
// positive number of minor units within range that prints back to the
// same value.
func FuzzParseYuan(f *testing.F) {
	for _, s := range []string{"12.34", "0.01", "1288", "1288.0", "-1", "1e3", "00.10", "9999999999999.99", " 5.5 ", "", ".5", "5."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := parseYuan(s)
		if !ok {
			return
		}
		if !validAmount(v) {
			t.Fatalf("%q → %d out of range", s, v)
		}
		back := Money(v, "CNY")
		whole := strings.ReplaceAll(strings.TrimSuffix(back, " CNY"), ",", "")
		if w, ok2 := parseYuan(whole); !ok2 || w != v {
			t.Fatalf("%q → %d → %q → %d", s, v, whole, w)
		}
	})
}

// FuzzDesensitise: whatever a channel (or an attacker) sends, the stored
// body is valid UTF-8, bounded, and never holds a sensitive field's value
// of more than four characters in the clear.
func FuzzDesensitise(f *testing.F) {
	for _, s := range []string{`{"resource":{"ciphertext":"abcdefghijkl"},"id":"x"}`, "buyer_id=2088101117955611&trade_no=1",
		"\xff\xfe", `{"payer":{"openid":"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}}`, "plain text", strings.Repeat("a", 9000)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out := desensitise(b)
		if !utf8.ValidString(out) {
			t.Fatalf("stored body is not UTF-8: %q", out)
		}
		if len(out) > maxStored+len("…") {
			t.Fatalf("stored body of %d bytes", len(out))
		}
		// A buyer's openid under its field name is masked.
		if strings.HasPrefix(string(b), `{"payer":{"openid":"`) && json.Valid(b) && strings.Contains(out, `"openid":"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"`) {
			t.Fatalf("an openid in the clear: %s", out)
		}
	})
}
