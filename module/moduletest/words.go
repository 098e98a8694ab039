package moduletest

import (
	"reflect"
	"strings"
	"testing"

	"github.com/keelwork/keel/module/web"
)

// JSONFields lists the JSON names of the fields of the structs given
// (their json tags, else their Go names): what an event payload or an
// evidence value writes.
func JSONFields(values ...any) []string {
	var out []string
	for _, v := range values {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = typ.Field(i).Name
			}
			out = append(out, name)
		}
	}
	return out
}

// FieldsHaveWords fails t for each field scope (a module's name) writes
// in evidence or payloads that has no words (web.RegisterFields): every
// field has Chinese words; its English may be the name itself ("Sold"),
// never a JSON name with an underscore.
func FieldsHaveWords(t testing.TB, scope string, fields ...string) {
	t.Helper()
	for _, f := range fields {
		if zh, en := web.FieldWord("zh", scope, f), web.FieldWord("en", scope, f); zh == f || strings.Contains(en, "_") {
			t.Errorf("field %q of %s has no words: %q / %q (register them with web.RegisterFields)", f, scope, zh, en)
		}
	}
}
