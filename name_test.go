package keel

import (
	"regexp"
	"strings"
	"testing"
)

// nameRule is the rule validName implements, as the regular expression it
// replaced: the fuzzer holds the two to the same answers.
var nameRule = regexp.MustCompile(`^[A-Za-z0-9_.:\-]{1,128}$`)

func FuzzValidName(f *testing.F) {
	for _, s := range []string{"", "default", "bench.noop", "sms:deliver-v2", "a b", "ä", "x\n", "Q_1",
		strings.Repeat("a", 128), strings.Repeat("a", 129), "-", ":", "\x00", "queue/1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validName(s), nameRule.MatchString(s); got != want {
			t.Fatalf("validName(%q) = %v, the rule says %v", s, got, want)
		}
	})
}
