package reservation

import (
	"reflect"
	"strings"
	"testing"

	"github.com/keelwork/keel/module/web"
)

// TestEventFieldsHaveWords: every field of the module's event payloads
// reads in words on the console's event pages.
func TestEventFieldsHaveWords(t *testing.T) {
	fields := map[string]bool{"slots": true}
	for _, v := range []any{notificationBody{}, SlotAvailability{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			fields[name] = true
		}
	}
	for f := range fields {
		if zh, en := web.FieldWord("zh", Name, f), web.FieldWord("en", Name, f); zh == f || strings.Contains(en, "_") {
			t.Errorf("field %q has no words: %q / %q", f, zh, en)
		}
	}
	if w := web.FieldWord("zh", Name, "slots[0].available"); w != "时段 1 · 可预约" {
		t.Errorf("slots[0].available reads %q", w)
	}
}
