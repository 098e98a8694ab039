package inventory

import (
	"os"
	"regexp"
	"testing"

	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/modules/inventory/domain"
)

// TestEvidenceFieldsHaveWords: every field and source the reconcilers
// write into evidence, the balance's quantities and every field of the
// stock event read in words on the console in both languages.
func TestEvidenceFieldsHaveWords(t *testing.T) {
	src, err := os.ReadFile("recon.go")
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]bool{}
	for _, re := range []*regexp.Regexp{regexp.MustCompile(`"([a-z_0-9]+)": `), regexp.MustCompile(`evidence\("([a-z]+)"|, "([a-z]+)", map`)} {
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			for _, g := range m[1:] {
				if g != "" && g != "ours" && g != "ledger" {
					fields[g] = true
				}
			}
		}
	}
	for _, f := range moduletest.JSONFields(StockEvent{}, domain.Balance{}) {
		fields[f] = true
	}
	if len(fields) < 30 {
		t.Fatalf("found %d fields; the patterns no longer match the source", len(fields))
	}
	for f := range fields {
		moduletest.FieldsHaveWords(t, Name, f)
	}
	if w := web.FieldValueWord("zh", Name, "reservation.state", "reserved"); w != "已预占" {
		t.Errorf("state reserved reads %q", w)
	}
}
