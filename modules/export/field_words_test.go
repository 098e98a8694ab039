package export

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/keelwork/keel/module/web"
)

// TestEventFieldsHaveWords: every field of the completion event's payload
// reads in words on the console's event pages.
func TestEventFieldsHaveWords(t *testing.T) {
	src, err := os.ReadFile("merge.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`payload, _ := json\.Marshal\(map\[string\]any\{([^}]*)\}`).FindSubmatch(src)
	if m == nil {
		t.Fatal("merge.go no longer builds the completion payload this test reads")
	}
	keys := regexp.MustCompile(`"([a-z_0-9]+)":`).FindAllSubmatch(m[1], -1)
	if len(keys) < 4 {
		t.Fatalf("found %d fields in the completion payload", len(keys))
	}
	for _, k := range keys {
		f := string(k[1])
		if zh, en := web.FieldWord("zh", Name, f), web.FieldWord("en", Name, f); zh == f || strings.Contains(en, "_") {
			t.Errorf("field %q has no words: %q / %q", f, zh, en)
		}
	}
}
