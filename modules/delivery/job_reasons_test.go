package delivery

import (
	"strings"
	"testing"

	"github.com/keelwork/keel/module/web"
)

// TestPushJobReasonsInWords: what a push job ends with reads, on the
// engine's job pages, in the words of the module's own pages: every
// failure class with its detail (also a lost connection's "cancelled: …"),
// and every skip code.
func TestPushJobReasonsInWords(t *testing.T) {
	if got := web.ReasonWord("zh", LineName, "failed: ack_rejected: item rejected with code 9", nil); got != "客户 ACK 拒绝（非零结果）：item rejected with code 9" {
		t.Errorf("ack_rejected: %q", got)
	}
	if got := web.ReasonWord("en", LineName, "cancelled: conn_lost: gateway restarted", nil); !strings.HasPrefix(got, "Connection or process that wrote it was lost") || !strings.HasSuffix(got, ": gateway restarted") {
		t.Errorf("conn_lost: %q", got)
	}
	if got := web.ReasonWord("zh", LineName, SkipOtherTask, nil); got != "已被其他任务处理（其他任务已成功投递）" {
		t.Errorf("skip other_task: %q", got)
	}
	for key, l := range labels {
		text := ""
		if class, ok := strings.CutPrefix(key, "class."); ok {
			text = "failed: " + class + ": detail"
		} else if code, ok := strings.CutPrefix(key, "skip."); ok {
			text = code
		} else {
			continue
		}
		if got := web.ReasonWord("zh", LineName, text, nil); !strings.HasPrefix(got, l.zh) {
			t.Errorf("%s reads %q on the job pages; want %q", text, got, l.zh)
		}
	}
}
