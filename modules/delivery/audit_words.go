package delivery

import (
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/keelwork/keel/module/web"
)

// The words of the audit actions this module writes (the console's audit
// log shows them; a test checks every action the source writes has words).
func init() {
	web.RegisterJobKinds(map[string][2]string{
		KindPush:        {"向客户推送状态报告", "Push a status report to the customer"},
		KindRequeueItem: {"重推任务中的一条记录", "Push one record of a requeue task"},
		KindForward:     {"向运营商提交短信", "Submit a message to the carrier"},
		KindIngest:      {"补录早到的状态报告", "Record a status report that came before its submit"},
	})
	web.RegisterQueues(map[string][2]string{
		QueueName: {"状态报告推送", "Status report pushes"},
		QueueAux:  {"运营商链路", "Carrier link"},
	})
	web.RegisterBatchKinds(map[string][2]string{
		BatchKind: {"下游重推任务", "Downstream requeue task"},
	})
	web.RegisterActions(map[string][2]string{
		"delivery.enterprise_create": {"新建企业", "Create an enterprise"},
		"delivery.app_create":        {"新建应用", "Create an application"},
		"delivery.app_update":        {"修改应用设置", "Change an application's settings"},
		"delivery.requeue":           {"重推单条投递记录", "Requeue one delivery record"},
	})
	// The texts the module writes into a record's history itself; an
	// error from a counterpart or a person's reason reads as written.
	web.RegisterReasons(LineName,
		web.SystemReason{Text: `not written: (?P<error>.*)`, ZH: "未写出：{error}", EN: "not sent: {error}"},
		web.SystemReason{Text: `DELIVER_RESP after the ACK timeout; the attempt stays unconfirmed`,
			ZH: "ACK 超时后才收到 DELIVER_RESP，本次尝试仍记为未确认", EN: "DELIVER_RESP arrived after the ACK timeout; the attempt stays unconfirmed"},
	)
	web.RegisterReasons(LineName, jobReasons()...)
}

// jobReasons are the words of what a push job ends with, as the engine's
// job pages show it: "failed: <class>: <detail>" (and "cancelled: …" for a
// lost connection's item, see splitFailure) and the skip codes, in the
// words the module's own pages use for them.
func jobReasons() []web.SystemReason {
	var out []web.SystemReason
	for _, key := range slices.Sorted(maps.Keys(labels)) {
		l := labels[key]
		if class, ok := strings.CutPrefix(key, "class."); ok {
			out = append(out, web.SystemReason{Text: `(?:failed|cancelled): ` + regexp.QuoteMeta(class) + `: (?P<detail>.*)`,
				ZH: l.zh + "：{detail}", EN: l.en + ": {detail}"})
		}
		if code, ok := strings.CutPrefix(key, "skip."); ok {
			out = append(out, web.SystemReason{Text: regexp.QuoteMeta(code), ZH: l.zh, EN: l.en})
		}
	}
	return out
}
