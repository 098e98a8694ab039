package delivery

// Labels of statuses, outcomes, reasons and classes. The console and the
// API show these words, never the raw codes alone.

import (
	"strings"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module/web"
)

type label struct{ zh, en string }

var labels = map[string]label{
	// record statuses
	"status.pending":      {"待投递", "Pending"},
	"status.awaiting_ack": {"等待 ACK", "Awaiting ACK"},
	"status.delivered":    {"已投递", "Delivered"},
	"status.failed":       {"投递失败", "Failed"},
	"status.unconfirmed":  {"未确认", "Unconfirmed"},
	"status.rejected":     {"已拒绝", "Rejected"},
	// kinds
	"kind.report": {"状态回执", "Status report"},
	"kind.mo":     {"上行短信", "MO message"},
	// task states: a task runs, may pause and resume, and ends completed,
	// partially completed (some items failed) or terminated by an operator
	"task.queued":            {"排队中", "Queued"},
	"task.running":           {"执行中", "Running"},
	"task.held":              {"部分应用已自动暂停：其任务项等待人工继续，任务不会自行结束", "Held: items of auto-paused applications wait for a resume; the task does not end by itself"},
	"task.paused":            {"已暂停", "Paused"},
	"task.completed":         {"已完成", "Completed"},
	"task.partial_completed": {"部分完成", "Partially completed"},
	"task.terminated":        {"已终止", "Terminated"},
	// item outcomes: where each item of a task stands; the counters of a
	// task always sum to its total
	"outcome.queued":               {"排队", "Queued"},
	"outcome.processing":           {"处理中", "Processing"},
	"outcome.waiting_connection":   {"等待连接", "Waiting for connection"},
	"outcome.waiting_external_ack": {"等待外部 ACK", "Waiting for another channel's ACK"},
	"outcome.waiting_ack":          {"等待 ACK", "Waiting for ACK"},
	"outcome.waiting":              {"等待", "Waiting"},
	"outcome.success":              {"成功", "Succeeded"},
	"outcome.failed":               {"失败", "Failed"},
	"outcome.skipped":              {"跳过", "Skipped"},
	"outcome.unprocessed":          {"未处理", "Unprocessed"},
	// skip reasons: the item ended without calling the gateway because
	// pushing again would be wrong or pointless
	"skip.state_changed":            {"执行前状态已变化", "Status changed before execution"},
	"skip.confirmed_after_creation": {"创建任务后才被客户确认（由其他投递链路完成）", "Confirmed by the customer after the task was created (completed by another channel)"},
	"skip.other_task":               {"已被其他任务处理（其他任务已成功投递）", "Handled by another task (it delivered successfully)"},
	"skip.already_succeeded":        {"本任务已成功处理", "Already succeeded in this task"},
	"skip.not_in_snapshot":          {"不属于任务快照", "Not in the task's snapshot"},
	"skip.app_disabled":             {"应用或投递能力已停用", "Application or delivery capability disabled"},
	"skip.incomplete_data":          {"投递数据不完整", "Delivery data incomplete"},
	"skip.no_submit_mapping":        {"缺少原 Submit 映射", "Original Submit mapping missing"},
	"skip.handled_elsewhere":        {"已由其他投递链路处理", "Handled by another push"},
	"skip.already_delivered":        {"已投递，无需推送", "Already delivered"},
	// waits: an item is not failed while it waits for a connection or an ACK
	"wait.connection":   {"客户离线，等待可用连接（未写出）", "Customer offline: waiting for a connection (not sent)"},
	"wait.external_ack": {"其他链路已写出，等待其 ACK 结论", "Sent by another channel: waiting for its ACK"},
	"wait.ack":          {"本任务已写出，等待客户 ACK", "Sent by this task: waiting for the customer's ACK"},
	// failure classes: why a push failed, as the operator reads it
	"class.ack_timeout":    {"ACK 超时", "ACK timeout"},
	"class.ack_rejected":   {"客户 ACK 拒绝（非零结果）", "ACK rejected (non-zero result)"},
	"class.invalid_msg_id": {"ACK 无法关联原消息（Msg_Id 不符）", "ACK names another Msg_Id"},
	"class.invalid_ack":    {"ACK 无效", "Invalid ACK"},
	"class.conn_closed":    {"连接断开，未收到 ACK（不计入安全阈值）", "Connection closed before the ACK (not counted)"},
	"class.conn_lost":      {"写出的连接或进程已丢失，结果未知（不计入安全阈值）", "Connection or process that wrote it was lost; outcome unknown (not counted)"},
	"class.http_timeout":   {"HTTP 推送超时", "HTTP push timed out"},
	"class.http_status":    {"HTTP 非 2xx 响应", "HTTP non-2xx answer"},
	"class.http_connect":   {"HTTP 无法连接", "HTTP endpoint unreachable"},
	"class.encode":         {"报文无法编码", "Message could not be encoded"},
	"class.gateway_error":  {"网关调用失败", "Gateway call failed"},
	"class.retryable":      {"处理出错（将重试）", "Processing error (retried)"},
	"class.timeout":        {"处理超时", "Processing timed out"},
	// protocols and application statuses
	"proto.cmpp20":     {"CMPP 2.0", "CMPP 2.0"},
	"proto.cmpp30":     {"CMPP 3.0", "CMPP 3.0"},
	"proto.http":       {"HTTP 推送", "HTTP push"},
	"app.enabled":      {"启用", "Enabled"},
	"app.disabled":     {"停用", "Disabled"},
	"pause.auto":       {"自动暂停（达到安全阈值）", "Auto-paused (safety threshold)"},
	"pause.manual":     {"人工暂停", "Paused by an operator"},
	"refuse.awaiting":  {"等待 ACK 的记录不得重投", "Records awaiting their ACK cannot be requeued"},
	"refuse.moved":     {"记录状态已变化，请刷新后重试", "The record changed; refresh and try again"},
	"refuse.not_found": {"记录不存在", "No such record"},
}

// Label returns the word for key ("status.pending", "skip.other_task")
// in lang ("zh" or "en"); an unknown key is returned as is.
func Label(lang, key string) string {
	// The engine's task states and item outcomes have one translation,
	// shared with the console (module/web).
	if o, ok := strings.CutPrefix(key, "outcome."); ok {
		return web.OutcomeWord(web.Lang(lang), keeltype.BatchOutcome(o))
	}
	if st, ok := strings.CutPrefix(key, "task."); ok && web.BatchStateWord(lang, keeltype.BatchState(st)) != st {
		return web.BatchStateWord(web.Lang(lang), keeltype.BatchState(st))
	}
	l, ok := labels[key]
	if !ok {
		return key
	}
	if lang == "en" {
		return l.en
	}
	return l.zh
}
