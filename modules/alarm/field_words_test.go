package alarm

import (
	"reflect"
	"strings"
	"testing"

	"github.com/keelwork/keel/module/web"
)

// TestEvidenceFieldsHaveWords: every field of the severe reconciler's
// evidence reads in words on the discrepancy page.
func TestEvidenceFieldsHaveWords(t *testing.T) {
	typ := reflect.TypeOf(Undelivered{})
	for i := range typ.NumField() {
		f, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if zh, en := web.FieldWord("zh", Name, f), web.FieldWord("en", Name, f); zh == f || strings.Contains(en, "_") {
			t.Errorf("field %q has no words: %q / %q", f, zh, en)
		}
	}
}
