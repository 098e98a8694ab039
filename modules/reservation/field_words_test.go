package reservation

import (
	"testing"

	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/module/web"
)

// TestEventFieldsHaveWords: every field of the module's event payloads
// reads in words on the console's event pages.
func TestEventFieldsHaveWords(t *testing.T) {
	moduletest.FieldsHaveWords(t, Name, append(moduletest.JSONFields(notificationBody{}, SlotAvailability{}), "slots")...)
	if w := web.FieldWord("zh", Name, "slots[0].available"); w != "时段 1 · 可预约" {
		t.Errorf("slots[0].available reads %q", w)
	}
}
