package payment

import (
	"os"
	"regexp"
	"strings"
	"testing"

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
