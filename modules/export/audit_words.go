package export

import (
	"regexp"

	"github.com/keelwork/keel/module/web"
)

// The fixed reasons the module's own audit records carry (a person's
// cancel or retry reason is what they typed).
const (
	reasonRequested = "export requested"
	reasonOrphan    = "unreferenced past the retry and manual windows"
)

// The words of the audit actions and system actors this module writes
// (the console's audit log shows them; a test checks every action the
// source writes has words).
func init() {
	web.RegisterTopics(map[string][2]string{TopicCompleted: {"导出完成", "Export completed"}})
	web.RegisterConsumers(map[string][2]string{"export-notice": {"导出完成通知", "Export notices"}})
	web.RegisterJobKinds(map[string][2]string{
		"export.shard":   {"导出一个分片", "Export one shard"},
		"export.merge":   {"合并分片生成文件", "Merge shards into the file"},
		"export.orphans": {"清理无主的导出文件", "Remove orphaned export files"},
	})
	web.RegisterQueues(map[string][2]string{
		QueueShards: {"导出分片", "Export shards"},
		QueueMerge:  {"导出合并与清理", "Export merges and cleanup"},
	})
	web.RegisterActions(map[string][2]string{
		"export.create":        {"新建导出任务", "Create an export"},
		"export.cancel":        {"取消导出任务", "Cancel an export"},
		"export.retry":         {"重试导出任务", "Retry an export"},
		"export.orphan_delete": {"清理孤立的导出文件", "Delete an orphaned export file"},
	})
	// The English is the stored text itself, which is how the console
	// recognises these rows.
	web.RegisterReasons("export",
		web.SystemReason{Code: "export.requested", Text: regexp.QuoteMeta(reasonRequested), ZH: "发起导出", EN: reasonRequested},
		web.SystemReason{Code: "export.orphan", Text: regexp.QuoteMeta(reasonOrphan), ZH: "超过重试与人工处理期限且无任务引用", EN: reasonOrphan})
	web.RegisterSystemActors(map[string][2]string{
		"system:export-orphan-cleaner": {"系统（导出文件清理）", "system (export file cleaner)"},
	})
}
