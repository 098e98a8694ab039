package payment

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/module/web"
)

// TestSuggestionsHaveEnglish: every suggested action the reconcilers
// write has its English words, so the English console does not show a
// payment discrepancy's suggestion in Chinese.
func TestSuggestionsHaveEnglish(t *testing.T) {
	quoted := regexp.MustCompile(`SuggestedAction: *"([^"(]+?)(?: \(|")`)
	n := 0
	for _, f := range []string{"recon.go", "intraday.go"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range quoted.FindAllStringSubmatch(string(src), -1) {
			zh := strings.TrimSpace(m[1])
			n++
			if en := web.ReasonWord("en", Name, zh, nil); en == zh {
				t.Errorf("%s: %q has no English words", f, zh)
			}
		}
	}
	if n < 15 {
		t.Fatalf("found %d suggestions in the source; the pattern no longer matches it", n)
	}
}

// TestEvidenceFieldsHaveWords: every field the reconcilers write into
// evidence (the keys of the maps in their source) and every field of the
// module's event payloads reads in words on the console in both
// languages, not as its JSON name.
func TestEvidenceFieldsHaveWords(t *testing.T) {
	key := regexp.MustCompile(`"([a-z_0-9]+)": `)
	sources := map[string]bool{"ours": true, "channel": true, "ledger": true, "orders": true}
	fields := map[string]bool{}
	for _, f := range []string{"recon.go", "intraday.go"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range key.FindAllStringSubmatch(string(src), -1) {
			if !sources[m[1]] {
				fields[m[1]] = true
			}
		}
	}
	for _, f := range moduletest.JSONFields(PaymentEvent{}, RefundEvent{}, FeeEvent{}) {
		fields[f] = true
	}
	if len(fields) < 25 {
		t.Fatalf("found %d fields; the pattern no longer matches the source", len(fields))
	}
	for f := range fields {
		moduletest.FieldsHaveWords(t, Name, f)
	}
	// A bill line's field reads with its position; a state in words.
	if w := web.FieldWord("zh", Name, "rows[1].fee_minor"); w != "账单行 2 · 手续费" {
		t.Errorf("rows[1].fee_minor reads %q", w)
	}
	if w := web.FieldValueWord("en", Name, "rows[0].state", "refunded"); w != "refunded" || web.FieldValueWord("zh", Name, "state", "refunded") != "已退款" {
		t.Errorf("state refunded reads %q / %q", w, web.FieldValueWord("zh", Name, "state", "refunded"))
	}
}
