package delivery

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
)

// page renders one console page (GET) or runs one form post as the
// console would (form parsed, actor in the context).
func page(t *testing.T, m *Module[pgxTx], method, target string, form url.Values, v *module.View) (*module.Rendered, *httptest.ResponseRecorder) {
	t.Helper()
	var r *http.Request
	if form != nil {
		r = httptest.NewRequest(method, target, strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		r = httptest.NewRequest(method, target, nil)
	}
	r = r.WithContext(alice())
	if form != nil {
		if err := r.ParseForm(); err != nil {
			t.Fatal(err)
		}
	}
	w := httptest.NewRecorder()
	var out *module.Rendered
	var err error
	mux := http.NewServeMux()
	for _, p := range m.Pages() {
		h := p.Handle
		mux.HandleFunc(p.Pattern, func(w http.ResponseWriter, r *http.Request) { out, err = h(w, r, v) })
	}
	mux.ServeHTTP(w, r)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	return out, w
}

func operatorView(lang string) *module.View {
	return &module.View{Lang: lang, CSRF: "csrf-token", Actor: "user:alice", Role: module.RoleOperator}
}

func mustContain(t *testing.T, what string, body string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(body, p) {
			t.Fatalf("%s lacks %q", what, p)
		}
	}
}

// TestConsolePages walks the console: the record list with its filter bar
// (enterprise → application, type, status, Beijing dates, keyword, page
// sizes 10/25/50 and a size change back to page 1), single and page
// requeue, the preview step with its counts and warnings, task creation,
// the task list with its state filter and the task detail with its three
// parts, Chinese words for every status and reason, and the controls.
func TestConsolePages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hc := newHTTPCustomer(t, "secret-hp01", ackAll)
	i := e.start(testSettings("cmpp_addr", "off"))
	e1 := e.enterprise(i, "华东物流")
	e2 := e.enterprise(i, "北方零售")
	a := e.app(i, e1, "物流回调", "hp01", ProtoHTTP, hc.srv.URL)
	other := e.app(i, e2, "零售营销", "hp02", ProtoCMPP30, "")
	var recs []*Record
	for k := range 30 {
		st := []Status{StatusFailed, StatusDelivered, StatusAwaitingACK}[k%3]
		recs = append(recs, e.seed(i, a, st, time.Now().Add(-time.Duration(k)*time.Minute), "1380000"+pad4(k)))
	}
	e.seed(i, other, StatusPending, time.Now(), "13900000000")
	v := operatorView("zh")

	out, _ := page(t, i.m, "GET", "/delivery/records?enterprise_id="+itoa(e1)+"&size=25&page=1", nil, v)
	body := string(out.Body)
	mustContain(t, "record list", body, `id="f-enterprise"`, "华东物流", "物流回调", `id="f-kind"`, "状态回执", `id="f-status"`,
		"投递失败", "已投递", "等待 ACK", `data-date="date"`, `name="keyword"`, `<option value="10"`, `<option value="25" selected`,
		`<option value="50"`, "按筛选条件重投", "重投所选", `data-min-reason="5"`, `id="next"`)
	if strings.Contains(body, "零售营销") {
		t.Fatal("the application select is not limited to the chosen enterprise")
	}
	if strings.Contains(body, `name="page"`) {
		t.Fatal("the filter form carries the page: changing the size would not return to page 1")
	}
	if n := strings.Count(body, `<tr data-id=`); n != 25 {
		t.Fatalf("page of 25 shows %d rows", n)
	}
	out, _ = page(t, i.m, "GET", "/delivery/records?enterprise_id="+itoa(e1)+"&size=25&page=2", nil, v)
	if n := strings.Count(string(out.Body), `<tr data-id=`); n != 5 || !strings.Contains(string(out.Body), `id="prev"`) {
		t.Fatalf("page 2 of 25 shows %d rows", n)
	}

	// Single requeue, then a page requeue of a delivered and an awaiting record.
	_, w := page(t, i.m, "POST", "/delivery/records/"+itoa(recs[0].ID)+"/requeue",
		url.Values{"reason": {"客户要求补推"}, "version": {itoa(recs[0].Version)}, "back": {"/delivery/records?size=25"}}, v)
	if loc := w.Header().Get("Location"); w.Code != http.StatusSeeOther || !strings.Contains(loc, "flash=") {
		t.Fatalf("single requeue: %d %s", w.Code, loc)
	}
	_, w = page(t, i.m, "POST", "/delivery/records/requeue", url.Values{"reason": {"客户要求补推"},
		"id": {itoa(recs[1].ID) + ":" + itoa(recs[1].Version), itoa(recs[2].ID) + ":" + itoa(recs[2].Version)}}, v)
	loc, _ := url.Parse(w.Header().Get("Location"))
	if !strings.Contains(loc.Query().Get("flash"), "已重投 1 条，未重投 1 条") {
		t.Fatalf("page requeue: %s", loc)
	}
	_, w = page(t, i.m, "POST", "/delivery/records/"+itoa(recs[3].ID)+"/requeue", url.Values{"reason": {"短"}}, v)
	if loc, _ := url.Parse(w.Header().Get("Location")); loc.Query().Get("err") == "" {
		t.Fatalf("a short reason was accepted: %s", loc)
	}
	defer func() {
		if t.Failed() {
			jobs, _ := i.c.JobList(alice(), &keeldriverJobList{Kinds: []string{KindPush}})
			for _, j := range jobs {
				t.Logf("job %d %s key=%s wait=%s errors=%v result=%s", j.ID, j.State, j.FlowKey, j.WaitReason, j.Errors, j.Result)
			}
			t.Logf("keys %v; r0 %+v", i.m.heldKeys(), e.record(i, recs[0].ID).Status)
		}
	}()
	waitFor(t, 10*time.Second, "the requeued records to be delivered", func() bool {
		return e.record(i, recs[0].ID).Status == StatusDelivered && e.record(i, recs[1].ID).Status == StatusDelivered
	})
	// The record's history says its details in words: the status it was
	// created in by its label, a claim without its internal token (which
	// stays in the cell's title only).
	out, _ = page(t, i.m, "GET", "/delivery/records/"+itoa(recs[0].ID), nil, v)
	hist := string(out.Body)
	if j := strings.Index(hist, `id="history"`); j >= 0 {
		hist = hist[j:]
	}
	mustContain(t, "record history", hist, "创建", "投递失败", "认领并写出", "客户要求补推")
	if strings.Contains(hist, ">failed</td>") {
		t.Fatalf("the history shows a raw status:\n%s", hist)
	}

	// The preview step and the task.
	out, _ = page(t, i.m, "GET", "/delivery/requeue/preview?enterprise_id="+itoa(e1)+"&status=delivered&page=3&size=50", nil, v)
	body = string(out.Body)
	mustContain(t, "preview", body, "筛选命中数", "可重投数", "规则跳过数", "状态分布", "涉及应用数", "最早记录时间", "快照时间",
		`id="dup-warning"`, "重复处理", "等待 ACK 的记录不得重投", `name="rate"`, `name="task_reason"`, `minlength="5"`)
	token := regexp.MustCompile(`name="token" value="([^"]+)"`).FindStringSubmatch(body)
	if token == nil {
		t.Fatal("no token on the preview page")
	}
	out, _ = page(t, i.m, "GET", "/delivery/requeue/preview?status=awaiting_ack", nil, v)
	if b := string(out.Body); !strings.Contains(b, `id="refused"`) || strings.Contains(b, `name="token"`) {
		t.Fatal("an awaiting_ack preview offers creation")
	}
	_, w = page(t, i.m, "POST", "/delivery/tasks", url.Values{"token": {token[1]}, "rate": {"5"}, "auto_pause": {"10"},
		"task_reason": {"事故 INC-9 补推已确认记录"}}, v)
	if loc := w.Header().Get("Location"); !strings.Contains(loc, "flash=") {
		t.Fatalf("create: %s", loc)
	}
	list, err := i.m.Tasks(alice(), "zh", "", 0, 10)
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("tasks: %v %+v", err, list)
	}
	task := list.Items[0]
	waitTask(t, i, task.ID, 20*time.Second, keeltype.BatchCompleted, keeltype.BatchPartialCompleted)

	out, _ = page(t, i.m, "GET", "/delivery/tasks?state=completed", nil, v)
	mustContain(t, "task list", string(out.Body), "任务号", "企业/应用范围", "已完成", "成功", "跳过", "等待", "创建人", "user:alice",
		`id="f-state"`, "部分完成", "已终止")
	out, _ = page(t, i.m, "GET", "/delivery/tasks/"+itoa(task.ID), nil, v)
	mustContain(t, "task detail", string(out.Body), `id="task-info"`, `id="task-summary"`, `id="task-items"`, "筛选快照", "快照时间",
		"安全阈值", "排队", "处理中", "等待连接", "等待外部 ACK", "等待 ACK", "成功", "失败", "跳过", "未处理", "原状态", "已投递",
		"事故 INC-9 补推已确认记录", "企业：华东物流")

	// Controls on a fresh task whose application is offline.
	pv, err := i.m.PreviewTask(alice(), Filter{AppID: other.ID})
	if err != nil {
		t.Fatal(err)
	}
	held, err := i.m.CreateTask(alice(), CreateTaskRequest{Token: pv.Token, Reason: "离线客户补推", Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct{ action, state string }{{"pause", "paused"}, {"resume", "queued running"}, {"terminate", "terminated"}} {
		_, w = page(t, i.m, "POST", "/delivery/tasks/"+itoa(held.ID)+"/"+step.action, url.Values{"reason": {"人工控制测试"}}, v)
		if loc, _ := url.Parse(w.Header().Get("Location")); loc.Query().Get("err") != "" {
			t.Fatalf("%s: %s", step.action, loc.Query().Get("err"))
		}
		b, _ := i.c.BatchGet(alice(), held.ID)
		if !strings.Contains(step.state, string(b.State)) {
			t.Fatalf("after %s: %s", step.action, b.State)
		}
	}
	out, _ = page(t, i.m, "GET", "/delivery/tasks/"+itoa(held.ID)+"?outcome=unprocessed", nil, v)
	mustContain(t, "terminated task", string(out.Body), "已终止", "未处理")

	en, _ := page(t, i.m, "GET", "/delivery/records", nil, operatorView("en"))
	mustContain(t, "English list", string(en.Body), "Downstream deliveries", "Requeue by filter")
	viewer := &module.View{Lang: "zh", Role: module.RoleViewer}
	vout, _ := page(t, i.m, "GET", "/delivery/records", nil, viewer)
	if strings.Contains(string(vout.Body), "重投所选") {
		t.Fatal("a viewer is offered requeue")
	}
}
