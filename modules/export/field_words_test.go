package export

import (
	"os"
	"regexp"
	"testing"

	"github.com/keelwork/keel/module/moduletest"
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
		moduletest.FieldsHaveWords(t, Name, string(k[1]))
	}
}
