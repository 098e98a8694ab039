package keelevents

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzValidateEvent: whatever it is given, validation never panics, and
// what it accepts respects the documented limits (so nothing the database
// or a bus subject cannot carry is ever written).
func FuzzValidateEvent(f *testing.F) {
	f.Add("payment.succeeded", "pay-1:succeed", "order-1", "", `{"amount":100}`, "trace", "abc")
	f.Add("a..b", "id with space", "k\x00", "t", `{"a":`, "", "")
	f.Add("x.>", "é", "\xff", strings.Repeat("t", 300), `null`, "a b", "\n")
	f.Fuzz(func(t *testing.T, topic, id, key, typ, payload, hk, hv string) {
		ev := Event{Topic: topic, ID: id, Key: key, Type: typ, Payload: json.RawMessage(payload)}
		if hk != "" {
			ev.Headers = map[string]string{hk: hv}
		}
		if ValidateEvent(&ev) != nil {
			return
		}
		if len(topic) == 0 || len(topic) > MaxTopic || strings.Contains(topic, "..") || strings.ContainsAny(topic, "> *") {
			t.Fatalf("accepted topic %q", topic)
		}
		if len(id) == 0 || len(id) > MaxID || strings.ContainsAny(id, " \n*>") {
			t.Fatalf("accepted id %q", id)
		}
		if !utf8.ValidString(key) || len(key) == 0 || len(key) > MaxKey {
			t.Fatalf("accepted key %q", key)
		}
		if !json.Valid(ev.Payload) {
			t.Fatalf("accepted payload %q", payload)
		}
	})
}

// FuzzPattern: patterns never panic, and a valid pattern matches only
// topics under it.
func FuzzPattern(f *testing.F) {
	f.Add("pay.>", "pay.succeeded")
	f.Add("pay", "pay.succeeded")
	f.Add(".>", "")
	f.Add("a.b.>", "a.bc")
	f.Fuzz(func(t *testing.T, pattern, topic string) {
		if ValidatePattern(pattern) != nil {
			return
		}
		if MatchTopic(pattern, topic) {
			prefix, wild := strings.CutSuffix(pattern, ".>")
			if wild && !strings.HasPrefix(topic, prefix+".") || !wild && topic != pattern {
				t.Fatalf("%q matched %q", pattern, topic)
			}
		}
	})
}
