package alarm

import "github.com/keelwork/keel/module/web"

// The system actor this module's own background work is recorded under,
// and the words of what its audit log (alarm_audit) records. The log
// stores actions without the module's name ("ack"); they are registered
// as "alarm.ack", the way the engine's log names a module's actions, and
// read through auditAction.
func init() {
	web.RegisterReconcilers(map[string][2]string{ReconName: {"严重告警送达核对", "Severe alarms delivered"}})
	web.RegisterJobKinds(map[string][2]string{
		"alarm.notice": {"发送告警通知", "Send an alarm notice"},
	})
	web.RegisterQueues(map[string][2]string{
		QueueSevere:   {"严重告警通知", "Severe alarm notices"},
		QueueOrdinary: {"一般告警通知", "Ordinary alarm notices"},
	})
	web.RegisterSystemActors(map[string][2]string{
		"system:alarm": {"系统（告警）", "system (alarms)"},
	})
	web.RegisterActions(map[string][2]string{
		"alarm.rule_version":   {"发布规则新版本", "Publish a new rule version"},
		"alarm.ack":            {"确认告警", "Acknowledge an alarm"},
		"alarm.silence":        {"新建静默", "Create a silence"},
		"alarm.silence_expire": {"提前结束静默", "End a silence early"},
		"alarm.ticket_take":    {"接手工单", "Take over a ticket"},
		"alarm.storm_open":     {"进入告警风暴", "A storm began"},
		"alarm.storm_over":     {"告警风暴结束", "A storm ended"},
		"alarm.replay_merge":   {"合并回放风暴积压", "Merge a storm's held notices for replay"},
	})
	web.RegisterReasons(Name,
		web.SystemReason{Text: `版本 (?P<version>\d+)`, ZH: "版本 {version}", EN: "version {version}"},
		web.SystemReason{Text: `峰值积压 (?P<peak>\d+)`, ZH: "峰值积压 {peak} 条", EN: "peak backlog {peak} samples"},
		web.SystemReason{Text: `普通积压 (?P<backlog>\d+) 条，超过风暴水位 (?P<water>\d+)`,
			ZH: "普通积压 {backlog} 条，超过风暴水位 {water}", EN: "ordinary backlog {backlog} above the storm water of {water}"},
		web.SystemReason{Text: `(?P<held>\d+) 条待发通知合并为 (?P<summaries>\d+) 条摘要`,
			ZH: "{held} 条待发通知合并为 {summaries} 条摘要", EN: "{held} held notices merged into {summaries} summaries"},
		// The severe-alarm reconciler's suggested action (recon.go).
		web.SystemReason{Text: `严重告警未送达且无人接管：立即电话通知值班`,
			ZH: "严重告警未送达且无人接管：立即电话通知值班", EN: "A severe alarm was not delivered and nobody took it: phone the on-call operator now"},
	)
}

// auditAction is the registered name of an action alarm_audit stores.
func auditAction(action string) string { return Name + "." + action }
