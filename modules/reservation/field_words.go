package reservation

import "github.com/keelwork/keel/module/web"

// fieldWords name the fields of the module's event payloads, so the
// console's event pages say 时段 where the JSON says slot_id.
var fieldWords = map[string][2]string{
	"notification_id": {"通知编号", "Notification"},
	"kind":            {"类型", "Kind"},
	"slots":           {"时段", "Slot"},
	"slot_id":         {"时段编号", "Slot"},
	"capacity":        {"容量", "Capacity"},
	"held":            {"已占用", "Held"},
	"available":       {"可预约", "Available"},
}

func init() {
	web.RegisterFields(Name, fieldWords)
	web.RegisterFieldValues(Name, "kind", kindWords)
}
