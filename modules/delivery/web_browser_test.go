package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/server/auth"
)

// TestDeliveryConsoleInBrowser drives Chromium as an operator through
// Keel's real server hosting the delivery module, on PostgreSQL with
// records of every status: the record list reached from the navigation
// with its filter bar and Chinese statuses, a page-size change back to
// page 1, a filter narrowed to one application's failed records, the
// preview of the filter-snapshot task with counts that match the data,
// the task's creation, its detail page (information, summary with 未处理,
// items), pause (a too-short reason refused by the dialog), resume and
// terminate through the console's confirmation dialog, the engine's
// audit of each with the operator and reasons, and the list at phone
// width.
func TestDeliveryConsoleInBrowser(t *testing.T) {
	t.Parallel()
	start := time.Now()
	e := newServedEnv(t)
	hc := newHTTPCustomer(t, "secret-h702", ackAll)
	// No gateway: the CMPP applications are offline, so the task's items
	// claimed before the terminate wait for a connection (for longer than
	// the test) and those never claimed end unprocessed.
	i := e.start(testSettings("cmpp_addr", "off", "connection_wait", "5m"))
	east := e.enterprise(i, "华东物流")
	north := e.enterprise(i, "北方零售")
	scope := e.app(i, east, "物流回执", "c701", ProtoCMPP30, "")
	hook := e.app(i, east, "物流回调", "h702", ProtoHTTP, hc.srv.URL)
	retail := e.app(i, north, "零售营销", "c703", ProtoCMPP20, "")
	now := time.Now()
	const scopeFailed = 40
	for k := range scopeFailed {
		e.seed(i, scope, StatusFailed, now.Add(-2*time.Hour+time.Duration(k)*time.Second), fmt.Sprintf("1370000%04d", k))
	}
	// The same application's other statuses, which the status filter leaves out.
	for k, st := range []Status{StatusDelivered, StatusUnconfirmed, StatusRejected, StatusAwaitingACK} {
		e.seed(i, scope, st, now.Add(-time.Hour-time.Duration(k)*time.Minute), fmt.Sprintf("1370001%04d", k))
	}
	// The newest records, one of each status, fill the first page.
	for k, r := range []struct {
		a  *Application
		st Status
		mo bool
	}{{hook, StatusDelivered, false}, {hook, StatusFailed, false}, {retail, StatusUnconfirmed, true},
		{retail, StatusRejected, false}, {hook, StatusPending, true}, {retail, StatusAwaitingACK, false}} {
		at, phone := now.Add(-time.Duration(k+1)*time.Minute), fmt.Sprintf("1390000%04d", k)
		if r.mo {
			e.seedMO(i, r.a, r.st, at, phone)
		} else {
			e.seed(i, r.a, r.st, at, phone)
		}
	}
	const totalRecords = scopeFailed + 4 + 6
	refresh(t, i)
	base, token := e.serve(i, "ops-wang", auth.RoleOperator)
	const operator = "token:ops-wang"
	t.Logf("data and server ready in %s", time.Since(start).Round(time.Millisecond))

	br := browsertest.New(t, 90*time.Second)
	do, shot := br.Do, br.Shot
	browserStart := time.Now()
	br.Login(base, token)

	// 1. The record list from the navigation: filter bar, Chinese statuses, paging.
	br.MustSee("navigation", "header nav", "下游投递记录", "重投任务")
	do("open the records from the navigation",
		chromedp.Click(chromedp.CSS(`header nav a[href="/delivery/records"]`)),
		chromedp.WaitVisible(chromedp.CSS("#records")), shot("delivery-records"))
	br.MustSee("filter bar", "#filter-bar", "企业", "企业应用", "投递类型", "状态", "创建日期（北京时间）从", "至", "关键词", "每页", "查询")
	checkOptions(t, br, "#f-enterprise option", "全部企业", "华东物流", "北方零售")
	checkOptions(t, br, "#f-app option", "全部应用", "物流回执 (c701)", "物流回调 (h702)", "零售营销 (c703)")
	checkOptions(t, br, "#f-kind option", "全部", "状态回执", "上行短信")
	checkOptions(t, br, "#f-status option", "全部", "待投递", "等待 ACK", "已投递", "投递失败", "未确认", "已拒绝")
	checkOptions(t, br, "#f-size option", "10", "25", "50")
	seen := checkStatusWords(t, br, "first page")
	for _, st := range AllStatuses {
		if !slices.Contains(seen, string(st)) {
			t.Errorf("first page lacks a %s record: %v", st, seen)
		}
	}
	checkRows(t, br, "first page", 10)
	br.MustSee("first page", ".pager", fmt.Sprintf("第 1 / %d 页", (totalRecords+9)/10))
	br.MustSee("total", "main .actions", fmt.Sprintf("共 %d 条", totalRecords))

	do("page 2", chromedp.Click(chromedp.CSS("#next")), chromedp.WaitVisible(chromedp.CSS("#prev")))
	br.MustSee("page 2", ".pager", "第 2 / ")
	do("25 per page", chromedp.SetValue(chromedp.CSS("#f-size"), "25"),
		chromedp.Click(chromedp.CSS(`#filter-bar button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#records tbody tr:nth-child(11)")), shot("delivery-records-25"))
	br.MustSee("size change", ".pager", fmt.Sprintf("第 1 / %d 页", (totalRecords+24)/25))
	checkRows(t, br, "25 per page", 25)
	if loc := location(t, br); strings.Contains(loc, "page=") {
		t.Errorf("the size change kept a page number: %s", loc)
	}
	checkStatusWords(t, br, "25 per page")

	// 2. Filter one application's failed records and preview the task.
	do("filter", chromedp.SetValue(chromedp.CSS("#f-status"), "failed"),
		chromedp.SetValue(chromedp.CSS("#f-app"), itoa(scope.ID)),
		chromedp.Click(chromedp.CSS(`#filter-bar button[type="submit"]`)),
		chromedp.WaitReady(chromedp.CSS(`#f-status option[value="failed"][selected]`)),
		chromedp.WaitVisible(chromedp.CSS("#records")), shot("delivery-records-filtered"))
	br.MustSee("filtered total", "main .actions", fmt.Sprintf("共 %d 条", scopeFailed))
	checkRows(t, br, "filtered", 25)
	for _, b := range checkStatusWordsRaw(t, br, "filtered") {
		if b != "failed=投递失败" {
			t.Errorf("filtered list shows %s", b)
		}
	}
	for _, app := range evalStrings(t, br, "filtered apps", `Array.from(document.querySelectorAll("#records tbody tr td:nth-child(5)")).map(e => e.textContent)`) {
		if app != scope.Name {
			t.Errorf("filtered list shows application %q", app)
		}
	}
	do("preview", chromedp.Click(chromedp.CSS("#requeue-filter")), chromedp.WaitVisible(chromedp.CSS("#preview")),
		shot("delivery-preview"))
	want := previewOracle(t, i, scope.ID, StatusFailed)
	for sel, n := range map[string]int{"#hits": want, "#eligible": want, "#rule-skipped": 0, "#apps": 1} {
		if got := strings.TrimSpace(br.Text("preview "+sel, sel)); got != strconv.Itoa(n) {
			t.Errorf("preview %s shows %q, the data has %d", sel, got, n)
		}
	}
	br.MustSee("preview", "#preview", "应用：物流回执；状态：投递失败", "快照时间", "最早记录时间", "等待 ACK 的记录不得重投")
	if got := strings.TrimSpace(br.Text("status distribution", "#by-status")); got != fmt.Sprintf("投递失败 %d", want) {
		t.Errorf("status distribution: %q", got)
	}
	if n := count(t, br, "#dup-warning, #refused"); n != 0 {
		t.Errorf("a preview of failed records warns (%d warnings)", n)
	}
	const taskReason = "工单 INC-7：补推失败回执"
	do("create the task",
		chromedp.SetValue(chromedp.CSS(`#create-task select[name="rate"]`), "1"),
		chromedp.SendKeys(chromedp.CSS(`#create-task input[name="task_reason"]`), taskReason),
		chromedp.Click(chromedp.CSS(`#create-task button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#confirm-ok")))
	// The form has its reason: the dialog does not ask for it again.
	if n := count(t, br, "#confirm label:not([hidden]) #confirm-reason"); n != 0 {
		t.Errorf("the creation dialog asks for the reason a second time")
	}
	br.Confirm("confirm the creation", "", "main .flash")
	do("task list", chromedp.WaitVisible(chromedp.CSS("#tasks")), shot("delivery-tasks"))
	m := regexp.MustCompile(`已创建重投任务 #(\d+)`).FindStringSubmatch(br.Text("flash", "main .flash"))
	if m == nil {
		t.Fatalf("no creation flash: %s", br.Text("flash", "main .flash"))
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	task, err := i.m.Task(context.Background(), "zh", id)
	if err != nil {
		t.Fatal(err)
	}
	if task.Total != int64(want) || task.Rate != 1 || task.Reason != taskReason || task.CreatedBy != operator ||
		task.Filter != (Filter{AppID: scope.ID, Status: StatusFailed}) {
		t.Fatalf("task as created: total %d rate %v reason %q by %q filter %+v", task.Total, task.Rate, task.Reason, task.CreatedBy, task.Filter)
	}
	row := fmt.Sprintf(`#tasks tr[data-id="%d"]`, id)
	br.MustSee("task row", row, "#"+m[1], "华东物流 / 物流回执", taskReason, strconv.Itoa(want), operator)
	if st := br.Text("task row state", row+" .badge"); st != "排队中" && st != "执行中" {
		t.Errorf("new task's state: %q", st)
	}

	// 3. The task detail and its controls.
	taskPath := "/delivery/tasks/" + m[1]
	do("task detail", chromedp.Click(chromedp.CSS(row+` a[href="`+taskPath+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#task-items")), shot("delivery-task"))
	br.MustSee("task information", "#task-info", "任务信息", "筛选快照", "应用：物流回执；状态：投递失败", "快照时间", taskReason,
		"令牌 ops-wang", "1 条/秒/应用", "连续失败 10", "只暂停该应用")
	heads := evalStrings(t, br, "summary", `Array.from(document.querySelectorAll("#counters thead th")).map(e => e.textContent)`)
	if !slices.Equal(heads, []string{"总数", "排队", "处理中", "等待连接", "等待外部 ACK", "等待 ACK", "成功", "失败", "跳过", "未处理"}) {
		t.Errorf("summary columns: %v", heads)
	}
	br.MustSee("summary total", "#counters tbody td:first-child", strconv.Itoa(want))
	checkItems(t, br, "task detail", want)
	if st := br.Text("state", "#tstate"); st != "排队中" && st != "执行中" {
		t.Errorf("task detail state: %q", st)
	}

	const pauseReason, resumeReason, terminateReason = "暂停：客户维护窗口", "客户维护结束，继续补推", "改由新任务处理，终止本任务"
	do("pause with a too-short reason",
		chromedp.Click(chromedp.CSS("#task-actions button.pause")),
		chromedp.WaitVisible(chromedp.CSS("#confirm-ok")),
		chromedp.SendKeys(chromedp.CSS("#confirm-reason"), "暂停"),
		chromedp.Click(chromedp.CSS("#confirm-ok")),
		chromedp.WaitVisible(chromedp.CSS("#confirm-ok")))
	if open := evalStrings(t, br, "dialog kept", `[String(document.getElementById("confirm").open), location.pathname]`); !slices.Equal(open, []string{"true", taskPath}) {
		t.Errorf("a 2-character reason left the dialog: %v", open)
	}
	br.Confirm("pause", pauseReason[len("暂停"):], `#tstate[data-state="paused"]`)
	do("paused", shot("delivery-task-paused"))
	br.MustSee("paused", "#tstate", "已暂停")
	br.MustSee("paused flash", "main .flash", "任务 #"+m[1]+" 已暂停")
	br.MustSee("pause reason", "#pause-why", "人工暂停")
	if b := engineTask(t, i, id); b.State != keeltype.BatchPaused {
		t.Errorf("engine state after pause: %s", b.State)
	}

	do("resume", chromedp.Click(chromedp.CSS("#task-actions button.resume")))
	br.Confirm("resume", resumeReason, "#task-actions button.pause")
	if st := br.Text("resumed", "#tstate"); st != "执行中" && st != "排队中" {
		t.Errorf("state after resume: %q", st)
	}
	br.MustSee("resumed flash", "main .flash", "已继续")

	do("terminate", chromedp.Click(chromedp.CSS("#task-actions button.terminate")))
	br.Confirm("terminate", terminateReason, `#tstate[data-state="terminated"]`)
	do("terminated", shot("delivery-task-terminated"))
	br.MustSee("terminated", "#tstate", "已终止")
	if n := count(t, br, "#task-actions button"); n != 0 {
		t.Errorf("a terminated task still offers %d controls", n)
	}
	b := engineTask(t, i, id)
	unprocessed := b.Counts[keeltype.OutcomeUnprocessed]
	if b.State != keeltype.BatchTerminated || unprocessed == 0 {
		t.Fatalf("engine after terminate: %s, %d unprocessed", b.State, unprocessed)
	}
	// Final buckets are settled by the terminate; an item claimed just
	// before it may still move from processing to waiting, so live buckets
	// are compared by their sum.
	shown := summaryCounts(t, br)
	var sum, liveShown, liveEngine int64
	for _, o := range keeltype.AllBatchOutcomes {
		sum += shown[o]
		if o.Live() {
			liveShown, liveEngine = liveShown+shown[o], liveEngine+b.Counts[o]
		} else if shown[o] != b.Counts[o] {
			t.Errorf("summary %s shows %d, the engine counts %d", o, shown[o], b.Counts[o])
		}
	}
	if sum != int64(want) || liveShown != liveEngine {
		t.Errorf("the summary sums to %d of %d, %d live (engine %d): %v", sum, want, liveShown, liveEngine, shown)
	}
	outcomes := checkItems(t, br, "terminated", want)
	if n := int64(len(slices.DeleteFunc(outcomes, func(s string) bool { return s != "unprocessed=未处理" }))); n != unprocessed {
		t.Errorf("the item list shows %d unprocessed, the engine %d", n, unprocessed)
	}
	t.Logf("terminated with %d of %d items unprocessed, counts %v", unprocessed, want, b.Counts)

	// 4. The engine's audit of the four actions.
	checkTaskAudit(t, i, id, operator, map[string]string{"batch.create": taskReason, "batch.pause": pauseReason,
		"batch.resume": resumeReason, "batch.terminate": terminateReason}, unprocessed)

	// 5–6. The list at phone width, then the console's errors.
	do("phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/delivery/records"),
		chromedp.WaitVisible(chromedp.CSS("#records")), shot("delivery-records-phone"))
	br.MustSee("phone", "main h1", "下游投递记录")
	br.CheckConsole()
	t.Logf("browser part %s, whole test %s", time.Since(browserStart).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if t.Failed() {
		t.Log("screenshots in", browsertest.ScreenshotDir())
	}
}

// checkOptions fails unless the options under sel read exactly want.
func checkOptions(t *testing.T, br *browsertest.Browser, sel string, want ...string) {
	t.Helper()
	got := evalStrings(t, br, sel, `Array.from(document.querySelectorAll(`+jsString(sel)+`)).map(e => e.textContent.trim())`)
	if !slices.Equal(got, want) {
		t.Errorf("%s: %q, want %q", sel, got, want)
	}
}

// summaryCounts reads the task summary's buckets.
func summaryCounts(t *testing.T, br *browsertest.Browser) map[keeltype.BatchOutcome]int64 {
	t.Helper()
	out := map[keeltype.BatchOutcome]int64{}
	for _, c := range badges(t, br, "summary", "#counters td[data-outcome]", "data-outcome") {
		code, n, _ := strings.Cut(c, "=")
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			t.Fatalf("summary cell %s: %v", c, err)
		}
		out[keeltype.BatchOutcome(code)] = v
	}
	if len(out) != len(keeltype.AllBatchOutcomes)-1 {
		t.Errorf("summary shows %d buckets: %v", len(out), out)
	}
	return out
}

// checkStatusWordsRaw lists the record list's status badges as
// "code=words".
func checkStatusWordsRaw(t *testing.T, br *browsertest.Browser, step string) []string {
	t.Helper()
	return badges(t, br, step, "#records tbody span.badge", "data-status")
}

// checkStatusWords fails for any status badge not in its Chinese words,
// and returns the statuses shown.
func checkStatusWords(t *testing.T, br *browsertest.Browser, step string) []string {
	t.Helper()
	var seen []string
	for _, b := range checkStatusWordsRaw(t, br, step) {
		code, words, _ := strings.Cut(b, "=")
		if want := Label("zh", "status."+code); words != want || want == "status."+code {
			t.Errorf("%s: status %s shown as %q, want %q", step, code, words, want)
		}
		seen = append(seen, code)
	}
	return seen
}

// checkItems checks the task's item list: every item shown, each with its
// frozen status and outcome in Chinese words; it returns the outcomes as
// "code=words".
func checkItems(t *testing.T, br *browsertest.Browser, step string, want int) []string {
	t.Helper()
	frozen := evalStrings(t, br, step, `Array.from(document.querySelectorAll("#items tbody tr td:nth-child(5)")).map(e => e.textContent)`)
	if len(frozen) != want {
		t.Errorf("%s: %d items shown, want %d", step, len(frozen), want)
	}
	for _, f := range frozen {
		if f != "投递失败" {
			t.Errorf("%s: frozen status %q", step, f)
		}
	}
	out := badges(t, br, step, "#items tbody span.badge", "data-outcome")
	for _, b := range out {
		code, words, _ := strings.Cut(b, "=")
		if w := Label("zh", "outcome."+code); words != w || w == "outcome."+code {
			t.Errorf("%s: outcome %s shown as %q", step, code, words)
		}
	}
	return out
}

func checkRows(t *testing.T, br *browsertest.Browser, step string, want int) {
	t.Helper()
	if n := count(t, br, "#records tbody tr[data-id]"); n != want {
		t.Errorf("%s: %d rows, want %d", step, n, want)
	}
}

// count is how many elements match sel.
func count(t *testing.T, br *browsertest.Browser, sel string) int {
	t.Helper()
	n, err := chromedp.Run(br.Ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+jsString(sel)+`).length`))
	if err != nil {
		t.Fatalf("counting %s: %v", sel, err)
	}
	return n
}

func location(t *testing.T, br *browsertest.Browser) string {
	t.Helper()
	loc, err := chromedp.Run(br.Ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// previewOracle counts the records of app in status as the store holds
// them, independently of the preview.
func previewOracle[TTx any](t *testing.T, i *inst[TTx], app int64, st Status) int {
	t.Helper()
	recs, err := i.m.st.listRecords(context.Background(), &Filter{}, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.AppID == app && r.Status == st {
			n++
		}
	}
	return n
}

func engineTask[TTx any](t *testing.T, i *inst[TTx], id int64) *keeltype.BatchRow {
	t.Helper()
	b, err := i.c.BatchGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkTaskAudit checks the task's audit entries: each action once, by
// the operator, with its reason; the terminate names how many items it
// made unprocessed.
func checkTaskAudit[TTx any](t *testing.T, i *inst[TTx], id int64, operator string, reasons map[string]string, unprocessed int64) {
	t.Helper()
	l, err := i.c.AuditList(context.Background(), &keel.AuditListParams{Target: fmt.Sprintf("batch:%d", id), Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, a := range l {
		got[a.Action]++
		want, ok := reasons[a.Action]
		if !ok {
			continue
		}
		if a.Actor != operator || a.Reason != want {
			t.Errorf("audit %s by %q reason %q, want %q / %q", a.Action, a.Actor, a.Reason, operator, want)
		}
		if a.Action == "batch.terminate" {
			var c struct {
				Unprocessed int64 `json:"unprocessed"`
			}
			// The audit counts the items the terminate itself settled (never
			// claimed); an item claimed just before it ends unprocessed
			// afterwards, by its worker's check (BatchTerminate), so the
			// engine's count read later may be higher, never lower.
			if err := json.Unmarshal(a.Context, &c); err != nil || c.Unprocessed < 1 || c.Unprocessed > unprocessed {
				t.Errorf("terminate audit context %s, want 1 to %d unprocessed", a.Context, unprocessed)
			}
		}
	}
	for action := range reasons {
		if got[action] != 1 {
			t.Errorf("%d %s audit entries, want 1 (all: %v)", got[action], action, got)
		}
	}
}
