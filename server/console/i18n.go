package console

import (
	"net/http"
	"strings"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module/web"
)

// Languages: zh-CN first, English on request (?lang=en, remembered in a
// cookie).
const (
	langZH     = "zh"
	langEN     = "en"
	langCookie = "keel_lang"
)

func langOf(w http.ResponseWriter, r *http.Request) string {
	if l := r.URL.Query().Get("lang"); l == langZH || l == langEN {
		http.SetCookie(w, &http.Cookie{Name: langCookie, Value: l, Path: "/", MaxAge: 365 * 24 * 3600,
			HttpOnly: true, SameSite: http.SameSiteStrictMode})
		return l
	}
	if c, err := r.Cookie(langCookie); err == nil && c.Value == langEN {
		return langEN
	}
	return langZH
}

// stateWords are the operator-facing names of job states.
var stateWords = map[keeltype.JobState][2]string{
	keeltype.JobStateAvailable: {"排队中", "queued"},
	keeltype.JobStateRunning:   {"执行中", "running"},
	keeltype.JobStateScheduled: {"已计划", "scheduled"},
	keeltype.JobStateRetryable: {"等待重试", "awaiting retry"},
	keeltype.JobStateWaiting:   {"等待中", "waiting"},
	keeltype.JobStateUnknown:   {"结果未知(待核查)", "result unknown (to check)"},
	keeltype.JobStateManual:    {"人工处理", "needs an operator"},
	keeltype.JobStateCompleted: {"已完成", "completed"},
	keeltype.JobStateFailed:    {"已失败", "failed"},
	keeltype.JobStateCancelled: {"已取消", "cancelled"},
	keeltype.JobStateSkipped:   {"已跳过", "skipped"},
}

func stateWord(lang string, s keeltype.JobState) string {
	w, ok := stateWords[s]
	if !ok {
		return string(s)
	}
	if lang == langEN {
		return w[1]
	}
	return w[0]
}

var breakerWords = map[keeltype.BreakerState][2]string{
	keeltype.BreakerClosed:   {"闭合(正常)", "closed (normal)"},
	keeltype.BreakerOpen:     {"断开(暂停认领)", "open (claims stopped)"},
	keeltype.BreakerHalfOpen: {"半开(试探中)", "half-open (probing)"},
}

// words is the console's dictionary: key → {zh, en}.
var words = map[string][2]string{
	"brand":           {"Keel 运维控制台", "Keel operations console"},
	"overview":        {"概览", "Overview"},
	"jobs":            {"任务", "Jobs"},
	"queues":          {"队列", "Queues"},
	"keys":            {"流控键", "Flow keys"},
	"audit":           {"审计日志", "Audit log"},
	"logout":          {"退出登录", "Log out"},
	"login":           {"登录", "Log in"},
	"token":           {"API 令牌", "API token"},
	"login_hint":      {"使用 API 令牌登录（keel tokens create 创建）。", "Log in with an API token (create one with keel tokens create)."},
	"login_failed":    {"令牌无效或已吊销。", "The token is unknown or revoked."},
	"throughput":      {"吞吐（全部实例，每个采样间隔）", "Throughput (all instances, per sample interval)"},
	"backlog":         {"积压（全部队列的未完成任务）", "Backlog (live jobs, all queues)"},
	"completed":       {"完成", "completed"},
	"failures":        {"失败", "failures"},
	"no_samples":      {"采样中，稍后显示图表…", "Sampling; the chart appears shortly…"},
	"oldest_age":      {"最老排队时长", "Oldest queued age"},
	"breakers":        {"熔断与暂停的流控键", "Tripped breakers and paused keys"},
	"none":            {"无", "none"},
	"queue":           {"队列", "Queue"},
	"kind":            {"类型", "Kind"},
	"state":           {"状态", "State"},
	"flow_key":        {"流控键", "Flow key"},
	"all":             {"全部", "all"},
	"filter":          {"筛选", "Filter"},
	"id":              {"编号", "ID"},
	"attempt":         {"尝试", "Attempt"},
	"reason":          {"原因", "Reason"},
	"created":         {"创建时间", "Created"},
	"next_page":       {"下一页", "Next page"},
	"first_page":      {"第一页", "First page"},
	"no_rows":         {"没有记录。", "Nothing here."},
	"job":             {"任务", "Job"},
	"cancel":          {"取消", "Cancel"},
	"retry":           {"重试", "Retry"},
	"delete":          {"删除", "Delete"},
	"confirm":         {"确认", "Confirm"},
	"back":            {"返回", "Back"},
	"confirm_cancel":  {"确定取消这个任务吗？执行中的任务会被通知停止。", "Cancel this job? A running job is told to stop."},
	"confirm_retry":   {"确定立即重试这个任务吗？", "Retry this job now?"},
	"confirm_delete":  {"确定删除这个任务吗？删除后无法恢复。", "Delete this job? This cannot be undone."},
	"confirm_pause":   {"确定暂停吗？所有实例将停止认领。", "Pause? Every instance stops claiming."},
	"confirm_resume":  {"确定恢复吗？", "Resume?"},
	"confirm_close":   {"确定手动闭合熔断器吗？", "Close the breaker by hand?"},
	"confirm_limit":   {"确定删除这条限流规则吗？", "Delete this limit?"},
	"reason_input":    {"操作原因（写入审计日志）", "Reason (goes to the audit log)"},
	"args":            {"参数", "Arguments"},
	"result":          {"结果", "Result"},
	"errors":          {"尝试与错误记录", "Attempts and errors"},
	"class":           {"分类", "Class"},
	"message":         {"信息", "Message"},
	"at":              {"时间", "At"},
	"details":         {"详情", "Details"},
	"run_at":          {"计划执行时间", "Run at"},
	"lease":           {"租约", "Lease"},
	"fence":           {"栅栏号", "Fence"},
	"wait_reason":     {"等待原因", "Waiting for"},
	"wait_deadline":   {"等待截止", "Wait deadline"},
	"skip_reason":     {"跳过原因", "Skip reason"},
	"fail_reason":     {"失败原因", "Failure reason"},
	"needs_check":     {"再次执行前先核查外部结果", "checks the outside world before any new attempt"},
	"paused":          {"已暂停", "paused"},
	"active":          {"运行中", "active"},
	"pause":           {"暂停", "Pause"},
	"resume":          {"恢复", "Resume"},
	"depth":           {"各状态数量", "Depth by state"},
	"paused_by":       {"暂停人", "Paused by"},
	"breaker":         {"熔断器", "Breaker"},
	"close_breaker":   {"闭合熔断器", "Close breaker"},
	"failures_row":    {"连续失败", "Consecutive failures"},
	"running":         {"执行中数量", "Running"},
	"last_error":      {"最近错误", "Last error"},
	"limits":          {"限流规则", "Flow limits"},
	"pattern":         {"匹配", "Pattern"},
	"rate":            {"速率(每秒)", "Rate (/s)"},
	"max_running":     {"最大并发", "Max running"},
	"set_limit":       {"保存限流规则", "Save limit"},
	"actor":           {"操作人", "Actor"},
	"action":          {"操作", "Action"},
	"target":          {"对象", "Target"},
	"role":            {"角色", "Role"},
	"forbidden":       {"当前角色无权执行此操作。", "Your role may not do this."},
	"done":            {"操作已完成。", "Done."},
	"error":           {"操作失败", "Failed"},
	"time_zone":       {"页面中的时间均为北京时间（UTC+8）；命令行与 API 使用 UTC。", "Times on these pages are Beijing time (UTC+8); the CLI and the API use UTC."},
	"error_title":     {"无法完成", "Something went wrong"},
	"back_home":       {"返回概览", "Back to the overview"},
	"lang_switch":     {"English", "中文"},
	"only_paused":     {"仅暂停", "paused only"},
	"only_tripped":    {"仅熔断", "tripped only"},
	"with_finished":   {"含已结束批量任务的键", "with finished batches' keys"},
	"prefix":          {"前缀", "Prefix"},
	"since_hint":      {"图表来自本进程定期采样。", "Charts come from this process's periodic samples."},
	"key":             {"键", "Key"},
	"pause_reason":    {"暂停原因", "Pause reason"},
	"autopause":       {"连续失败自动暂停", "paused automatically after consecutive failures"},
	"manual_pause":    {"人工暂停", "paused by an operator"},
	"batches":         {"批量任务", "Batches"},
	"batch":           {"批量任务", "Batch"},
	"batch_info":      {"基本信息", "Information"},
	"batch_summary":   {"执行汇总", "Summary"},
	"batch_items":     {"全部条目", "All items"},
	"name":            {"名称", "Name"},
	"progress":        {"进度", "Progress"},
	"creator":         {"创建人", "Created by"},
	"snapshot_at":     {"快照时间", "Snapshot time"},
	"filter_json":     {"筛选条件", "Filter"},
	"preview_counts":  {"预览统计", "Preview counts"},
	"filter_all":      {"全部记录", "all records"},
	"raw_value":       {"原始值", "Raw value"},
	"value":           {"值", "Value"},
	"filter_hash":     {"筛选条件指纹（SHA-256，同一条件总是同一指纹）", "Filter fingerprint (SHA-256: the same filter always gives the same one)"},
	"rate_per_key":    {"每键速率(每秒)", "Rate per key (/s)"},
	"eta":             {"预计剩余", "ETA"},
	"items_rate":      {"处理速度(条/秒)", "Items per second"},
	"started":         {"开始时间", "Started"},
	"finished":        {"结束时间", "Finished"},
	"total":           {"总数", "Total"},
	"subject":         {"对象", "Subject"},
	"outcome":         {"结果", "Outcome"},
	"trigger_key":     {"触发键", "Triggering key"},
	"failure_class":   {"失败分类", "Failure class"},
	"paused_keys":     {"已暂停的键", "Paused keys"},
	"terminate":       {"终止", "Terminate"},
	"confirm_bpause":  {"确定暂停这个批量任务吗？所有实例将停止认领其条目。", "Pause this batch? No instance claims its items until it is resumed."},
	"confirm_bresume": {"确定恢复这个批量任务吗？已成功的条目不会重复执行。", "Resume this batch? Items that succeeded are not repeated."},
	"confirm_bterm":   {"确定终止这个批量任务吗？未开始的条目将标记为未处理，且无法恢复。", "Terminate this batch? Items not yet started become unprocessed; this cannot be undone."},
	"confirm_kresume": {"确定恢复这个键吗？", "Resume this key?"},
	"reason_required": {"批量任务操作需要填写至少 5 个字的原因。", "Batch actions need a reason of at least 5 characters."},
	"no_create":       {"批量任务由业务模块的预览与创建流程生成；此处只读取和控制。", "Batches are created through a module's preview and create flow; this page reads and controls them."},
	"pause_auto":      {"自动暂停(键连续失败)", "paused automatically (a key kept failing)"},
	"oldest":          {"最老排队时长（任一队列）", "Oldest queued age (any queue)"},
	"time_axis":       {"时间（北京时间 UTC+8）", "time (Beijing, UTC+8)"},
	"unit_jobs":       {"单位：个任务", "unit: jobs"},
	"unit_jobs_per":   {"单位：个任务 / %s", "unit: jobs per %s"},
	"unit_seconds":    {"单位：秒", "unit: seconds"},
	"menu":            {"菜单", "Menu"},
	"find_hint":       {"按编号查找：任务、投递、预约、运单…", "Find by id: job, delivery, reservation, waybill…"},
	"home":            {"系统首页", "System home"},
	"search":          {"按编号查找", "Find by id"},
	"search_none":     {"没有找到编号为“%s”的记录。", "Nothing has the id “%s”."},
	"search_many":     {"找到 %d 条记录，请选择：", "%d records found; pick one:"},
	"search_partial":  {"以下系统暂时无法查询，结果可能不完整：", "These systems could not be searched just now, so the list may be incomplete: "},
	"search_scope":    {"可查找：任务编号、批量任务编号、流控键，以及各业务系统登记的编号（%s）。", "Searches job and batch ids, flow keys, and the ids each system registers (%s)."},
	"systems":         {"各系统状态", "Systems"},
	"home_unreadable": {"暂时无法读取该系统的状态。", "This system's numbers cannot be read just now."},
	"trend":           {"趋势", "Trend"},
	"open_list":       {"查看列表", "Open the list"},
	"no_home":         {"该系统没有首页。", "This system has no home."},
	"pages_of":        {"本系统的页面", "Pages of this system"},
	"unit_prefix":     {"单位：", "unit: "},
	"engine_name":     {"引擎", "Engine"},
}

func pick(lang string, w [2]string, ok bool, raw string) string {
	if !ok {
		return raw
	}
	if lang == langEN {
		return w[1]
	}
	return w[0]
}

// batchStateWord and outcomeWord are the engine's one translation
// (module/web), shared with every module.
func batchStateWord(lang string, st keeltype.BatchState) string { return web.BatchStateWord(lang, st) }

func outcomeWord(lang string, o keeltype.BatchOutcome) string { return web.OutcomeWord(lang, o) }

func word(lang, key string) string {
	w, ok := words[key]
	if !ok {
		return key
	}
	if lang == langEN {
		return w[1]
	}
	return w[0]
}

func pauseReasonWord(lang, r string) string {
	switch {
	case r == "manual":
		return word(lang, "manual_pause")
	case strings.HasPrefix(r, "auto"):
		return word(lang, "autopause")
	}
	return r
}
