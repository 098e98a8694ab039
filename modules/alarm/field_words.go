package alarm

import "github.com/keelwork/keel/module/web"

// fieldWords name the fields the severe-alarm reconciler writes into its
// evidence (Undelivered), so the console says 设备 where the JSON says
// device.
var fieldWords = map[string][2]string{
	"instance": {"告警实例", "Alarm instance"},
	"device":   {"设备", "Device"},
	"rule":     {"规则", "Rule"},
	"muted":    {"已静默", "Muted"},
	// A notice job's argument (NoticeArgs).
	"id": {"告警通知", "Alarm notice"},
}

func init() {
	web.RegisterFields(Name, fieldWords)
}
