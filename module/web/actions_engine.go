package web

// The engine's own audit actions and system actors (jobs, queues, flow
// keys and limits, bulk tasks, tokens and sessions, the events backbone,
// reconciliation and four-eyes approvals); modules register theirs.
func init() {
	RegisterActions(map[string][2]string{
		"job.cancel":                 {"取消任务", "Cancel a job"},
		"job.retry":                  {"立即重试任务", "Retry a job now"},
		"job.delete":                 {"删除任务", "Delete a job"},
		"queue.pause":                {"暂停队列", "Pause a queue"},
		"queue.resume":               {"恢复队列", "Resume a queue"},
		"flowkey.pause":              {"暂停流控键", "Pause a flow key"},
		"flowkey.resume":             {"恢复流控键", "Resume a flow key"},
		"flowkey.breaker_close":      {"手动闭合熔断器", "Close a breaker by hand"},
		"flowkey.autopause":          {"连续失败自动暂停流控键", "Flow key paused after consecutive failures"},
		"flowlimit.set":              {"保存限流规则", "Save a flow limit"},
		"flowlimit.delete":           {"删除限流规则", "Delete a flow limit"},
		"batch.create":               {"创建批量任务", "Create a batch"},
		"batch.pause":                {"暂停批量任务", "Pause a batch"},
		"batch.resume":               {"恢复批量任务", "Resume a batch"},
		"batch.terminate":            {"终止批量任务", "Terminate a batch"},
		"batch.key_resume":           {"恢复批量任务中的键", "Resume a key of a batch"},
		"batch.autopause":            {"批量任务自动暂停", "Batch paused automatically"},
		"batch.reconcile":            {"校正批量任务计数", "Correct a batch's counters"},
		"token.create":               {"创建 API 令牌", "Create an API token"},
		"token.revoke":               {"吊销 API 令牌", "Revoke an API token"},
		"session.login":              {"登录控制台", "Log in to the console"},
		"session.logout":             {"退出控制台", "Log out of the console"},
		"events.replay":              {"重放人工处理的事件", "Replay an event held for an operator"},
		"events.replay_failed":       {"重放事件失败", "Replaying an event failed"},
		"recon.run":                  {"运行对账", "Run a reconciliation"},
		"recon.discrepancy.open":     {"发现对账差异", "Discrepancy found"},
		"recon.discrepancy.reopen":   {"对账差异再次出现", "Discrepancy found again"},
		"recon.discrepancy.verify":   {"对账差异已核实消失", "Discrepancy verified gone"},
		"recon.discrepancy.resolve":  {"对账差异已解决", "Discrepancy resolved"},
		"recon.discrepancy.request":  {"申请处理对账差异", "Request a discrepancy's action"},
		"recon.discrepancy.approve":  {"批准处理对账差异", "Approve a discrepancy's action"},
		"recon.discrepancy.reject":   {"驳回处理对账差异", "Reject a discrepancy's action"},
		"recon.discrepancy.execute":  {"执行对账差异的处理", "Carry out a discrepancy's action"},
		"recon.discrepancy.autoheal": {"自动修复对账差异", "Discrepancy healed automatically"},
		"approval.request":           {"提交双人复核申请", "Request a four-eyes approval"},
		"approval.approve":           {"批准复核申请", "Approve a request"},
		"approval.reject":            {"驳回复核申请", "Reject a request"},
		"approval.execute":           {"执行已批准的申请", "Carry out an approved request"},
		"approval.cancel":            {"撤回复核申请", "Withdraw a request"},
	})
	RegisterSystemActors(map[string][2]string{
		"system:autopause":  {"系统（连续失败自动暂停）", "system (auto-pause)"},
		"system:reconciler": {"系统（批量任务计数校正）", "system (batch counter check)"},
		"system:recon":      {"系统（对账）", "system (reconciliation)"},
		"system:demo":       {"系统（演示数据）", "system (demo data)"},
	})
	// What reconciliation writes as its reasons by itself: keelrecon
	// stores the code and the run number (reason_arg) with the English
	// text; the texts match older rows that have no code.
	RegisterReasons("recon",
		SystemReason{Code: "recon.found", Text: `found by run (?P<reason_arg>\d+)`,
			ZH: "第 {reason_arg} 次对账运行发现", EN: "found by run {reason_arg}"},
		SystemReason{Code: "recon.found_again", Text: `found again by run (?P<reason_arg>\d+)`,
			ZH: "第 {reason_arg} 次对账运行再次发现", EN: "found again by run {reason_arg}"},
		SystemReason{Code: "recon.not_found", Text: `not found by run (?P<reason_arg>\d+)`,
			ZH: "第 {reason_arg} 次对账运行未再发现", EN: "not found by run {reason_arg}"},
		SystemReason{Code: "recon.manual", Text: `manual`, ZH: "手动运行", EN: "manual"},
		SystemReason{Code: "recon.schedule", Text: `schedule`, ZH: "按计划运行", EN: "schedule"},
		SystemReason{Code: "recon.safe_action", Text: `safe action of the reconciler`,
			ZH: "对账规则认定可自动执行的处理", EN: "safe action of the reconciler"})
	RegisterReasons("approval",
		SystemReason{Code: "approval.recon_gone", Text: `the discrepancy is gone \(run (?P<reason_arg>\d+)\)`,
			ZH: "对账差异已消失（第 {reason_arg} 次运行），申请撤回", EN: "the discrepancy is gone (run {reason_arg})"})
}
