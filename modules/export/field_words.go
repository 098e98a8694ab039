package export

import "github.com/keelwork/keel/module/web"

// fieldWords name the fields of the completion event's payload
// (TopicCompleted), so the console's event pages say 导出任务 where the
// JSON says task.
var fieldWords = map[string][2]string{
	// The job arguments and results of shards and merges.
	"task_id": {"导出任务", "Export task"},
	"shard":   {"分片", "Shard"},
	"gen":     {"合并轮次", "Merge generation"},
	"key":     {"文件位置", "File location"},
	"task":    {"导出任务", "Export task"},
	"tenant":  {"租户", "Tenant"},
	"user":    {"用户", "User"},
	"rows":    {"行数", "Rows"},
	"sha256":  {"文件摘要", "File digest"},
}

func init() { web.RegisterFields(Name, fieldWords) }
