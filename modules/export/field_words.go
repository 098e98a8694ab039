package export

import "github.com/keelwork/keel/module/web"

// fieldWords name the fields of the completion event's payload
// (TopicCompleted), so the console's event pages say 导出任务 where the
// JSON says task.
var fieldWords = map[string][2]string{
	"task":   {"导出任务", "Export task"},
	"tenant": {"租户", "Tenant"},
	"user":   {"用户", "User"},
	"rows":   {"行数", "Rows"},
	"sha256": {"文件摘要", "File digest"},
}

func init() { web.RegisterFields(Name, fieldWords) }
