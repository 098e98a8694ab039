package alarm

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/keelwork/keel/module/moduletest"
)

// TestEvidenceFieldsHaveWords: every field of the severe reconciler's
// evidence reads in words on the discrepancy page.
func TestEvidenceFieldsHaveWords(t *testing.T) {
	moduletest.FieldsHaveWords(t, Name, moduletest.JSONFields(Undelivered{})...)
}

// TestHistoryReasonsHaveWords: every reason the module writes into an
// instance's history (the literals given to history and HistoryInsert)
// reads in words in both languages.
func TestHistoryReasonsHaveWords(t *testing.T) {
	lit := regexp.MustCompile(`(?:m\.history\(ctx, tx, [^"]*?|"HistoryInsert"\), [^"]*?)"([a-z_]+)"`)
	n := 0
	for _, f := range []string{"process.go", "module.go"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range lit.FindAllStringSubmatch(string(src), -1) {
			n++
			if zh, en := HistoryReason("zh", m[1]), HistoryReason("en", m[1]); zh == m[1] || en == m[1] {
				t.Errorf("%s: history reason %q has no words", f, m[1])
			}
		}
	}
	if n < 4 {
		t.Fatalf("found %d history reasons; the pattern no longer matches the source", n)
	}
	if w := HistoryReason("zh", "severity_2"); !strings.HasPrefix(w, "级别变为") || strings.Contains(w, "severity") {
		t.Errorf("severity_2 reads %q", w)
	}
}
