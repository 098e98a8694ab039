package web

// The words of the reasons the engine itself writes: audit entries of its
// own background work and a batch's last error. The codes are what the
// engine stores in the audit context (keel.Reason*); the texts read the
// rows it wrote before it stored codes, and the last-error column, which
// has no context.
func init() {
	RegisterReasons("",
		SystemReason{Code: "batch.counters_drifted", Text: `counters drifted from items`,
			ZH: "计数与任务项不符，已按任务项更正", EN: "The counters disagreed with the items and were corrected from them"},
		SystemReason{Code: "flowkey.failure_threshold",
			Text: `(?P<consecutive_failures>\d+) consecutive failures reached the threshold of (?P<threshold>\d+)`,
			ZH:   "连续失败 {consecutive_failures} 次，达到自动暂停阈值 {threshold}",
			EN:   "{consecutive_failures} failures in a row reached the auto-pause threshold of {threshold}"},
		SystemReason{Code: "batch.key_autopaused", Text: `key (?P<key>.+?) auto-paused: (?P<last_error>.*)`,
			ZH: "键 {key} 连续失败已自动暂停，最后一次错误：{last_error}",
			EN: "Key {key} paused itself after repeated failures; last error: {last_error}"},
		SystemReason{Text: `configured in code`, ZH: "程序配置中设定", EN: "Set in the program's configuration"},
		SystemReason{Text: `materialization: (?P<error>.*)`,
			ZH: "生成任务项失败：{error}", EN: "Creating the items failed: {error}"},
		// A job's error history: the entries the engine writes itself.
		SystemReason{Text: `lease expired \(owner (?P<owner>.*)\)`,
			ZH: "执行者 {owner} 的租约已过期，任务已收回", EN: "The lease of {owner} expired and the job was taken back"},
		SystemReason{Text: `no worker registered for kind "(?P<kind>.*)"`,
			ZH: "没有为类型 {kind} 注册执行者", EN: "No worker is registered for kind {kind}"},
		SystemReason{Text: `context deadline exceeded`,
			ZH: "超时：执行超过了时限", EN: "Timed out: the attempt ran past its time limit"},
		SystemReason{Text: `check returned no decision`,
			ZH: "核查没有给出结论", EN: "The check gave no decision"},
		SystemReason{Text: `check: (?P<reason>.*)`,
			ZH: "核查：{reason}", EN: "Check: {reason}"},
		SystemReason{Text: `the worker failed after CompleteTx; its transaction's commit is uncertain`,
			ZH: "执行者在事务中完成任务后出错，提交结果未知；任务已交回，下次执行前先核查",
			EN: "The worker failed after completing the job in its transaction, so the commit's outcome was unknown; the job was handed back to be checked before it runs again"},
		SystemReason{Text: `after CompleteTx, commit uncertain: (?P<error>.*)`,
			ZH: "在事务中完成后出错，提交结果未知，下次执行前先核查：{error}",
			EN: "Failed after completing in its transaction; the commit's outcome was unknown and is checked before the next run: {error}"},
	)
}
