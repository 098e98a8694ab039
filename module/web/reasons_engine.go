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
		SystemReason{Text: `materialization: (?P<error>.*)`,
			ZH: "生成任务项失败：{error}", EN: "Creating the items failed: {error}"},
	)
}
