package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
)

// The requeue task pages: the preview step, creation, the task list and
// the task detail with its controls.

type previewData struct {
	*pageView
	Preview     *TaskPreview
	FilterText  string
	FilterQuery template.URL
	ByStatus    []statusCount
	Rates       []float64
}

type statusCount struct {
	Status Status
	N      int64
}

func (m *Module[TTx]) pagePreview(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	f, err := FilterFromQuery(r.URL.Query())
	if err != nil {
		return nil, module.Invalid("%v", err)
	}
	p, err := m.PreviewTask(r.Context(), f)
	if err != nil {
		return nil, err
	}
	d := &previewData{pageView: &pageView{View: v, Back: r.URL.RequestURI()}, Preview: p, FilterText: m.filterText(v.Lang, &f),
		FilterQuery: template.URL(f.Query().Encode()), Rates: TaskRates}
	for _, s := range AllStatuses {
		if n := p.ByStatus[string(s)]; n > 0 {
			d.ByStatus = append(d.ByStatus, statusCount{Status: s, N: n})
		}
	}
	return render(v, v.Zh("按筛选条件重投", "Requeue by filter"), "/delivery/records", "preview", d)
}

// filterText describes a filter in words.
func (m *Module[TTx]) filterText(lang string, f *Filter) string {
	zh := lang != "en"
	var parts []string
	add := func(kzh, ken, val string) {
		if val == "" {
			return
		}
		if zh {
			parts = append(parts, kzh+"："+val)
		} else {
			parts = append(parts, ken+": "+val)
		}
	}
	ent, app := "", ""
	if f.EnterpriseID > 0 || f.AppID > 0 {
		s := m.scope(lang, f)
		ent, app, _ = strings.Cut(s, " / ")
		if f.EnterpriseID == 0 {
			ent = ""
		}
		if f.AppID == 0 {
			app = ""
		}
	}
	add("企业", "enterprise", ent)
	add("应用", "application", app)
	if f.Kind != "" {
		add("类型", "type", Label(lang, "kind."+string(f.Kind)))
	}
	if f.Status != "" {
		add("状态", "status", Label(lang, "status."+string(f.Status)))
	}
	if f.DateFrom != "" || f.DateTo != "" {
		add("创建日期（北京时间）", "created (Beijing)", f.DateFrom+" ~ "+f.DateTo)
	}
	add("关键词", "keyword", f.Keyword)
	if len(parts) == 0 {
		if zh {
			return "全部记录"
		}
		return "all records"
	}
	sep := "；"
	if !zh {
		sep = "; "
	}
	return strings.Join(parts, sep)
}

func (m *Module[TTx]) postCreateTask(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	rate, _ := strconv.ParseFloat(r.PostFormValue("rate"), 64)
	auto, _ := strconv.Atoi(r.PostFormValue("auto_pause"))
	b, err := m.CreateTask(r.Context(), CreateTaskRequest{Token: r.PostFormValue("token"), Reason: r.PostFormValue("task_reason"),
		Rate: rate, AutoPause: auto, PauseWholeTask: r.PostFormValue("pause_whole_task") != ""})
	if err != nil {
		http.Redirect(w, r, "/delivery/tasks?err="+url.QueryEscape(err.Error()), http.StatusSeeOther)
		return nil, nil
	}
	http.Redirect(w, r, fmt.Sprintf("/delivery/tasks?flash=%s", url.QueryEscape(v.Zh("已创建重投任务 #", "Created requeue task #")+itoa(b.ID))), http.StatusSeeOther)
	return nil, nil
}

func (m *Module[TTx]) postControl(f func(context.Context, int64, string) (*keeltype.BatchRow, error), zh, en string) func(http.ResponseWriter, *http.Request, *module.View) (*module.Rendered, error) {
	return func(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
		id, err := pathID(r)
		if err != nil {
			return nil, err
		}
		def := "/delivery/tasks/" + itoa(id)
		if _, err := f(r.Context(), id, r.PostFormValue("reason")); err != nil {
			backTo(w, r, def, "", err.Error())
			return nil, nil
		}
		backTo(w, r, def, v.Zh("任务 #"+itoa(id)+" "+zh, "Task #"+itoa(id)+" "+en), "")
		return nil, nil
	}
}

type tasksData struct {
	*pageView
	Tasks       *TaskList
	States      []keeltype.BatchState
	State       string
	First, Next string
}

func (m *Module[TTx]) pageTasks(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	q := r.URL.Query()
	state := keeltype.BatchState(q.Get("state"))
	if state != "" && !validTaskState(state) {
		state = ""
	}
	before, _ := strconv.ParseInt(q.Get("before"), 10, 64)
	list, err := m.Tasks(r.Context(), v.Lang, state, before, 20)
	if err != nil {
		return nil, err
	}
	d := &tasksData{pageView: &pageView{View: v, Back: r.URL.RequestURI()}, Tasks: list, States: TaskStates, State: string(state)}
	base := url.Values{}
	if state != "" {
		base.Set("state", string(state))
	}
	if before > 0 {
		d.First = "/delivery/tasks?" + base.Encode()
	}
	if list.Next > 0 {
		base.Set("before", itoa(list.Next))
		d.Next = "/delivery/tasks?" + base.Encode()
	}
	// The title is the navigation's label for the page.
	return render(v, v.Zh("重投任务", "Requeue tasks"), "/delivery/tasks", "tasks", d)
}

type taskData struct {
	*pageView
	Task        *TaskView
	FilterText  string
	PauseApp    string
	Items       *ItemList
	Query       struct{ Outcome, MsgID, Reason string }
	Reasons     []reasonOption
	First, Next string
}

type reasonOption struct{ Code, Label string }

func (m *Module[TTx]) pageTask(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	t, err := m.Task(r.Context(), v.Lang, id)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	d := &taskData{pageView: &pageView{View: v, Back: r.URL.RequestURI()}, Task: t, FilterText: m.filterText(v.Lang, &t.Filter)}
	d.Query.Outcome, d.Query.MsgID, d.Query.Reason = q.Get("outcome"), q.Get("msg_id"), q.Get("reason")
	d.Items, err = m.TaskItems(r.Context(), v.Lang, id, ItemQuery{Outcome: keeltype.BatchOutcome(d.Query.Outcome),
		MsgID: d.Query.MsgID, Reason: d.Query.Reason, After: q.Get("after"), Limit: 50})
	if err != nil {
		return nil, err
	}
	d.PauseApp = m.pauseApp(t)
	d.Reasons = reasonOptions(v.Lang)
	base := url.Values{}
	for k, val := range map[string]string{"outcome": d.Query.Outcome, "msg_id": d.Query.MsgID, "reason": d.Query.Reason} {
		if val != "" {
			base.Set(k, val)
		}
	}
	path := "/delivery/tasks/" + itoa(id)
	if q.Get("after") != "" {
		d.First = path + "?" + base.Encode()
	}
	if d.Items.Next != "" {
		base.Set("after", d.Items.Next)
		d.Next = path + "?" + base.Encode()
	}
	return render(v, v.Zh("重投任务", "Requeue task")+" #"+itoa(id), "/delivery/tasks", "task", d)
}

// pauseApp names the application whose failures paused the whole task.
func (m *Module[TTx]) pauseApp(t *TaskView) string {
	var pc struct {
		Key string `json:"key"`
	}
	if len(t.PauseContext) == 0 || json.Unmarshal(t.PauseContext, &pc) != nil {
		return ""
	}
	id, ok := appOfKey(pc.Key)
	if !ok {
		return ""
	}
	if a, ok := m.apps.get(id); ok {
		return a.Name
	}
	return pc.Key
}

func reasonOptions(lang string) []reasonOption {
	var out []reasonOption
	for _, c := range SkipReasons[:8] {
		out = append(out, reasonOption{c, Label(lang, "skip."+c)})
	}
	for _, c := range []string{ClassAckTimeout, ClassAckRejected, ClassInvalidMsgID, ClassInvalidAck, ClassConnClosed,
		ClassHTTPTimeout, ClassHTTPStatus, ClassHTTPConnect, ClassEncode, ClassGateway} {
		out = append(out, reasonOption{c, Label(lang, "class."+c)})
	}
	return out
}
