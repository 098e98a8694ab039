package reservation

import "github.com/keelwork/keel/module/web"

// The words of the audit actions this module writes (the console's audit
// log shows them; a test checks every action the source writes has words).
func init() {
	web.RegisterTopics(map[string][2]string{
		AvailabilityTopic: {"余量变更", "Availability changed"},
		NotificationTopic: {"预约通知", "Reservation notice"},
	})
	web.RegisterConsumers(map[string][2]string{
		AvailabilityConsumer: {"余量推送", "Availability feed"},
		NotifierConsumer:     {"通知投递", "Notice delivery"},
	})
	web.RegisterJobKinds(map[string][2]string{
		KindScan:       {"扫描到期未到店的预约", "Scan for due no-shows"},
		KindCompensate: {"重试释放失败的预约", "Retry releases that failed"},
		KindRelease:    {"到期释放一个预约", "Release one reservation when due"},
		KindNotify:     {"发出到期的提醒", "Send a reminder when due"},
		KindRelay:      {"转交旧通知", "Hand over notices from before the outbox"},
	})
	web.RegisterQueues(map[string][2]string{
		DefaultQueue: {"预约释放与提醒", "Reservation releases and reminders"},
	})
	web.RegisterActions(map[string][2]string{
		"reservation.resource_create":     {"新建预约资源", "Create a resource"},
		"reservation.slot_create":         {"新建时段", "Create a slot"},
		"reservation.category_create":     {"新建服务类别", "Create a service category"},
		"reservation.category_update":     {"修改服务类别", "Change a service category"},
		"reservation.release_mode":        {"切换释放开关", "Switch the release mode"},
		"reservation.scan_now":            {"立即扫描到期预约", "Scan for due reservations now"},
		"reservation.restore":             {"恢复已释放的预约", "Restore a released reservation"},
		"reservation.capacity_repair":     {"修复时段容量计数", "Repair a slot's capacity count"},
		"reservation.dead_letter":         {"释放失败转入死信", "Release failed: moved to dead letters"},
		"reservation.dead_letter_requeue": {"重新处理死信", "Requeue a dead letter"},
		"reservation.noshow_policy":       {"修改爽约规则", "Change the no-show policy"},
		"reservation.restrict":            {"因爽约限制预约", "Restrict a user for no-shows"},
		"reservation.noshow_reset":        {"清零爽约次数", "Reset a user's no-shows"},
		"reservation.restriction_lift":    {"解除预约限制", "Lift a user's restriction"},
	})
	// The reasons the module writes into a reservation's history itself
	// (a person's reason reads as typed); rows already written read the
	// same way, the words match the stored text.
	web.RegisterReasons(Name,
		web.SystemReason{Text: `booked`, ZH: "预约", EN: "booked"},
		web.SystemReason{Text: `paid`, ZH: "已支付", EN: "paid"},
		web.SystemReason{Text: `checked in`, ZH: "签到", EN: "checked in"},
		web.SystemReason{Text: `cancelled`, ZH: "取消", EN: "cancelled"},
		web.SystemReason{Text: `appeal`, ZH: "申诉恢复", EN: "restored on appeal"},
		web.SystemReason{Text: `waitlist offer`, ZH: "候补递补", EN: "offered from the waitlist"},
		web.SystemReason{Text: `hold lapsed unpaid`, ZH: "未在时限内支付，名额已释放", EN: "the hold lapsed unpaid"},
		web.SystemReason{Text: `no-show: not checked in by the release point`, ZH: "爽约：释放时间点前未签到",
			EN: "no-show: not checked in by the release point"},
		web.SystemReason{Text: `moved from slot (?P<from>\d+) to slot (?P<to>\d+): (?P<reason>.*)`,
			ZH: "从时段 {from} 改到时段 {to}：{reason}", EN: "moved from slot {from} to slot {to}: {reason}"},
		web.SystemReason{Text: `moved from slot (?P<from>\d+) to slot (?P<to>\d+)`,
			ZH: "从时段 {from} 改到时段 {to}", EN: "moved from slot {from} to slot {to}"},
	)
}
