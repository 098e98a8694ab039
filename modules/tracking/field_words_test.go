package tracking

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/module/web"
)

// TestEvidenceFieldsHaveWords: every field the reconciler writes into
// evidence and the change events carry reads in words on the console.
func TestEvidenceFieldsHaveWords(t *testing.T) {
	key := regexp.MustCompile(`"([a-z_0-9]+)": |p\["([a-z_]+)"\]|ev\["([a-z_]+)"\]`)
	fields := map[string]bool{}
	for _, f := range []string{"recon.go", "ingest/ingest.go"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(src)
		if f == "ingest/ingest.go" { // only the event payloads
			i, j := strings.Index(text, "func changePayload"), strings.Index(text, "func change(")
			k := strings.Index(text, `json.Marshal(map[string]any{"carrier"`)
			if i < 0 || j < i || k < 0 {
				t.Fatal("ingest.go no longer has the payload builders this test reads")
			}
			text = text[i:j] + text[k:k+300]
		}
		for _, m := range key.FindAllStringSubmatch(text, -1) {
			for _, g := range m[1:] {
				if g != "" && g != "ours" {
					fields[g] = true
				}
			}
		}
	}
	if len(fields) < 18 {
		t.Fatalf("found %d fields; the patterns no longer match the source: %v", len(fields), fields)
	}
	for f := range fields {
		moduletest.FieldsHaveWords(t, Name, f)
	}
	if w := web.FieldValueWord("zh", Name, "carrier.milestone", "delivered"); w == "delivered" {
		t.Errorf("milestone delivered reads %q", w)
	}
}
