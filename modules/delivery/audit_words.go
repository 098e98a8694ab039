package delivery

import "github.com/keelwork/keel/module/web"

// The words of the audit actions this module writes (the console's audit
// log shows them; a test checks every action the source writes has words).
func init() {
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
}
