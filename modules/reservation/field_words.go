package reservation

import "github.com/keelwork/keel/module/web"

// fieldWords name the fields of the module's event payloads, so the
// console's event pages say 时段 where the JSON says slot_id.
var fieldWords = map[string][2]string{
	// The jobs' arguments and results.
	"reservation_id":  {"预约", "Reservation"},
	"version":         {"版本", "Version"},
	"outbox_id":       {"通知记录", "Notice record"},
	"after":           {"接续的扫描", "Continues the run"},
	"outcome":         {"处理结果", "Outcome"},
	"state":           {"预约状态", "Reservation state"},
	"error":           {"错误", "Error"},
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
	states := map[string][2]string{}
	for st, w := range stateWords {
		states[string(st)] = w
	}
	web.RegisterFieldValues(Name, "state", states)
	web.RegisterFieldValues(Name, "outcome", map[string][2]string{
		"released":                       {"已释放", "released"},
		"failed":                         {"释放失败，留待补偿重试", "failed, left to the retry pass"},
		"not_due":                        {"未到释放时间", "not yet due"},
		"stale":                          {"预约已变化，无需释放", "the reservation moved on; nothing to release"},
		"left_to_compensation":           {"留给补偿重试", "left to the retry pass"},
		"category_" + string(ModeOff):    {"类别已关闭自动释放", "auto-release is off for the category"},
		"category_" + string(ModeDryRun): {"类别处于演练模式，只记录不释放", "the category is in dry run: logged, not released"},
	})
}
