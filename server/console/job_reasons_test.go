package console

import (
	"encoding/json"
	"testing"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/server/api"
)

func init() {
	web.RegisterReasons("reasontest",
		web.SystemReason{Text: `opted_out`, ZH: "收件人已退订", EN: "The recipient opted out"},
		web.SystemReason{Text: `failed: rejected: (?P<detail>.*)`, ZH: "对方拒绝：{detail}", EN: "Rejected: {detail}"},
		web.SystemReason{Text: `offline`, ZH: "对方离线", EN: "The counterpart is offline"},
	)
}

// TestJobReasonsInWords: the reason beside a job's state on the job pages
// is said in the words its kind's module registered — a skip's code out of
// its {"skip_reason": …} result, a failure's class with its detail, a
// module's own wait reason — Chinese first; what has no words reads as
// the worker wrote it, and never as the result's JSON.
func TestJobReasonsInWords(t *testing.T) {
	zh, en := &view{Lang: "zh"}, &view{Lang: "en"}
	skipped := &api.Job{Kind: "reasontest.push", State: keeltype.JobStateSkipped, Result: json.RawMessage(`{"skip_reason":"opted_out"}`)}
	failed := &api.Job{Kind: "reasontest.push", State: keeltype.JobStateManual,
		Errors: []keeltype.AttemptError{{Message: "failed: rejected: code 9"}}}
	waiting := &api.Job{Kind: "reasontest.push", State: keeltype.JobStateWaiting, WaitReason: "offline"}
	engineWait := &api.Job{Kind: "reasontest.push", State: keeltype.JobStateWaiting, WaitReason: "connection"}
	wrapped := &api.Job{Kind: "reasontest.push", State: keeltype.JobStateFailed,
		Errors: []keeltype.AttemptError{{Message: "failed: offline"}}}
	unwords := &api.Job{Kind: "reasontest.push", State: keeltype.JobStateFailed,
		Errors: []keeltype.AttemptError{{Message: "failed: something new"}}}
	unknown := &api.Job{Kind: "other.push", State: keeltype.JobStateSkipped, Result: json.RawMessage(`{"skip_reason":"opted_out"}`)}
	for _, c := range []struct {
		v    *view
		j    *api.Job
		want string
	}{
		{zh, skipped, "跳过原因: 收件人已退订"},
		{en, skipped, "Skip reason: The recipient opted out"},
		{zh, failed, "失败原因: 对方拒绝：code 9"},
		{en, failed, "Failure reason: Rejected: code 9"},
		{zh, waiting, "等待原因: 对方离线"},
		{zh, engineWait, "等待原因: 等待连接"},
		// keel.JobFail's "failed: " wraps words the module has.
		{zh, wrapped, "失败原因: 对方离线"},
		{zh, unwords, "失败原因: failed: something new"},
		// Another module's words do not apply; the code reads as written.
		{zh, unknown, "跳过原因: opted_out"},
	} {
		if got := why(c.v, c.j); got != c.want {
			t.Errorf("%s %s in %s: %q, want %q", c.j.Kind, c.j.State, c.v.Lang, got, c.want)
		}
	}
	// Each of the engine's outcome wrappers reads as the words of what it
	// wraps, in the error history as beside the state.
	for _, msg := range []string{"failed: offline", "cancelled: offline", "permanent: offline", "result unknown: offline"} {
		if got := jobReason(zh, "reasontest.push", msg); got != "对方离线" {
			t.Errorf("%q reads %q", msg, got)
		}
	}
	// A flow key's last error, whose kind the key does not say, reads in
	// the words of whichever module registered it.
	if got := keyError(zh, "failed: offline"); got != "对方离线" {
		t.Errorf("a key's last error reads %q", got)
	}
	if got := keyError(en, "something new"); got != "something new" {
		t.Errorf("an unknown last error reads %q", got)
	}
}
