package delivery

import (
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/web"
)

//go:embed templates/*.html
var templateFiles embed.FS

var pageTmpl = template.Must(template.New("delivery").Funcs(template.FuncMap{
	"when":  fmtWhen,
	"whenp": fmtWhenP,
	"deref": func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	},
	"count":   func(t TaskView, o string) int64 { return countOf(t, keeltype.BatchOutcome(o)) },
	"waiting": waitingOf,
	"done":    doneOf,
	"max1": func(n int64) int64 {
		if n < 1 {
			return 1
		}
		return n
	},
	"pair":     func(v, t any) map[string]any { return map[string]any{"V": v, "Task": t} },
	"classKey": classKey,
}).ParseFS(templateFiles, "templates/*.html"))

func fmtWhen(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(Beijing).Format("2006-01-02 15:04:05")
}

func fmtWhenP(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return fmtWhen(*t)
}

func countOf(t TaskView, o keeltype.BatchOutcome) int64 {
	for _, c := range t.Counts {
		if c.Outcome == o {
			return c.N
		}
	}
	return 0
}

// doneOf is how many of a task's items have ended (every outcome that is
// not live), the list's progress.
func doneOf(t TaskView) int64 {
	var n int64
	for _, c := range t.Counts {
		if !c.Outcome.Live() {
			n += c.N
		}
	}
	return n
}

func waitingOf(t TaskView) int64 {
	return countOf(t, keeltype.OutcomeWaitingConnection) + countOf(t, keeltype.OutcomeWaitingExternalACK) +
		countOf(t, keeltype.OutcomeWaitingACK) + countOf(t, keeltype.OutcomeWaiting)
}

// pageView is what every template gets: the console's view and the
// address to come back to after a form post.
type pageView struct {
	*module.View
	Back string
}

// T picks the view's language.
func (p *pageView) T(zh, en string) string { return p.Zh(zh, en) }

// L is the label of a code in the view's language.
func (p *pageView) L(key string) string { return Label(p.Lang, key) }

// CanOperate reports whether the caller may change things.
func (p *pageView) CanOperate() bool { return p.Can(module.RoleOperator) }

// EventLabel names a history event.
func (p *pageView) EventLabel(e string) string {
	words := map[string][2]string{
		"created": {"创建", "created"}, "claimed": {"认领并写出", "claimed and sent"}, "reverted": {"撤回认领（未写出）", "claim undone (not sent)"},
		"delivered": {"客户确认成功", "acknowledged"}, "rejected": {"客户拒绝", "rejected"}, "unconfirmed": {"未确认", "unconfirmed"},
		"failed": {"失败", "failed"}, "requeued": {"人工重投", "requeued"}, "late_ack": {"超时后收到 ACK", "ACK after the timeout"},
	}
	if w, ok := words[e]; ok {
		return p.Zh(w[0], w[1])
	}
	return e
}

// EventDetail says a history event's detail in words: a creation's
// status by its label, a claim's token (an internal fence) not at all,
// and the texts the module writes by their registered words; an error
// from a counterpart reads as it came.
func (p *pageView) EventDetail(event, detail string) string {
	switch {
	case detail == "":
		return ""
	case event == "created":
		return Label(p.Lang, "status."+detail)
	case event == "claimed":
		return ""
	}
	return web.ReasonWord(p.Lang, LineName, detail, nil)
}

func (m *Module[TTx]) pages() []module.Page {
	v, op := module.RoleViewer, module.RoleOperator
	return []module.Page{
		{Pattern: "GET /delivery/records", Role: v, Handle: m.pageRecords},
		{Pattern: "GET /delivery/records/{id}", Role: v, Handle: m.pageRecord},
		{Pattern: "POST /delivery/records/{id}/requeue", Role: op, Handle: m.postRequeueOne},
		{Pattern: "POST /delivery/records/requeue", Role: op, Handle: m.postRequeuePage},
		{Pattern: "GET /delivery/requeue/preview", Role: op, Handle: m.pagePreview},
		{Pattern: "POST /delivery/tasks", Role: op, Handle: m.postCreateTask},
		{Pattern: "GET /delivery/tasks", Role: v, Handle: m.pageTasks},
		{Pattern: "GET /delivery/tasks/{id}", Role: v, Handle: m.pageTask},
		{Pattern: "POST /delivery/tasks/{id}/pause", Role: op, Handle: m.postControl(m.PauseTask, "已暂停", "paused")},
		{Pattern: "POST /delivery/tasks/{id}/resume", Role: op, Handle: m.postControl(m.ResumeTask, "已继续", "resumed")},
		{Pattern: "POST /delivery/tasks/{id}/terminate", Role: op, Handle: m.postControl(m.TerminateTask, "已终止", "terminated")},
	}
}

func render(v *module.View, title, nav, name string, data any) (*module.Rendered, error) {
	var b strings.Builder
	if err := pageTmpl.ExecuteTemplate(&b, name, data); err != nil {
		return nil, fmt.Errorf("rendering %s: %w", name, err)
	}
	return &module.Rendered{Title: title, Nav: nav, Body: template.HTML(b.String())}, nil
}

type recordsData struct {
	*pageView
	Filter      Filter
	FilterQuery template.URL
	Enterprises []EnterpriseView
	Kinds       []Kind
	Statuses    []Status
	Sizes       []int
	Size        int
	Page        *RecordPage
	Prev, Next  string
}

func (m *Module[TTx]) pageRecords(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	q := r.URL.Query()
	f, err := FilterFromQuery(q)
	pv := &pageView{View: v, Back: r.URL.RequestURI()}
	if err != nil {
		v.Error, f = err.Error(), Filter{}
	}
	size, _ := strconv.Atoi(q.Get("size"))
	if !validSize(size) {
		size = PageSizes[0]
	}
	page, _ := strconv.Atoi(q.Get("page"))
	recs, err := m.Records(r.Context(), v.Lang, f, page, size)
	if err != nil {
		return nil, err
	}
	apps, err := m.AppsView(r.Context())
	if err != nil {
		return nil, err
	}
	d := &recordsData{pageView: pv, Filter: f, FilterQuery: template.URL(f.Query().Encode()), Enterprises: apps.Enterprises,
		Kinds: []Kind{KindReport, KindMO}, Statuses: AllStatuses, Sizes: PageSizes, Size: size, Page: recs}
	link := func(p int) string {
		lq := f.Query()
		lq.Set("size", strconv.Itoa(size))
		lq.Set("page", strconv.Itoa(p))
		return "/delivery/records?" + lq.Encode()
	}
	if recs.Page > 1 {
		d.Prev = link(recs.Page - 1)
	}
	if recs.Page < recs.Pages {
		d.Next = link(recs.Page + 1)
	}
	return render(v, v.Zh("下游投递记录", "Downstream deliveries"), "/delivery/records", "records", d)
}

type recordData struct {
	*pageView
	Record  RecordView
	History []event
}

func (m *Module[TTx]) pageRecord(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	recs, err := m.st.recordsByIDs(r.Context(), []int64{id})
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("delivery record %d: %w", id, keeltype.ErrNotFound)
	}
	d := &recordData{pageView: &pageView{View: v, Back: r.URL.RequestURI()}, Record: viewRecord(v.Lang, recs[0])}
	_ = json.Unmarshal(recs[0].History, &d.History)
	return render(v, v.Zh("投递记录", "Delivery")+" #"+itoa(id), "/delivery/records", "record", d)
}

// backTo redirects to the form's back address (a console delivery page)
// with a flash message or an error.
func backTo(w http.ResponseWriter, r *http.Request, def, flash, errText string) {
	back := r.PostFormValue("back")
	if !strings.HasPrefix(back, "/delivery/") || strings.HasPrefix(back, "//") {
		back = def
	}
	u, err := url.Parse(back)
	if err != nil {
		u, _ = url.Parse(def)
	}
	q := u.Query()
	q.Del("flash")
	q.Del("err")
	if errText != "" {
		q.Set("err", errText)
	} else {
		q.Set("flash", flash)
	}
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

func (m *Module[TTx]) postRequeueOne(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	version, _ := strconv.ParseInt(r.PostFormValue("version"), 10, 64)
	res, err := m.Requeue(r.Context(), []int64{id}, []int64{version}, r.PostFormValue("reason"), "single")
	if err != nil {
		backTo(w, r, "/delivery/records", "", err.Error())
		return nil, nil
	}
	if !res[0].Requeued {
		backTo(w, r, "/delivery/records", "", Label(v.Lang, "refuse."+refuseKey(res[0].Refused)))
		return nil, nil
	}
	backTo(w, r, "/delivery/records", v.Zh("已重投记录 ", "Requeued record ")+itoa(id), "")
	return nil, nil
}

func refuseKey(code string) string {
	switch code {
	case "awaiting_ack":
		return "awaiting"
	case "not_found":
		return "not_found"
	}
	return "moved"
}

func (m *Module[TTx]) postRequeuePage(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	var ids, versions []int64
	for _, s := range r.PostForm["id"] {
		idText, verText, _ := strings.Cut(s, ":")
		id, err1 := strconv.ParseInt(idText, 10, 64)
		ver, err2 := strconv.ParseInt(verText, 10, 64)
		if err1 != nil || err2 != nil {
			return nil, module.Invalid("bad selection %q", s)
		}
		ids, versions = append(ids, id), append(versions, ver)
	}
	if len(ids) == 0 {
		backTo(w, r, "/delivery/records", "", v.Zh("请先勾选记录", "Select records first"))
		return nil, nil
	}
	res, err := m.Requeue(r.Context(), ids, versions, r.PostFormValue("reason"), "page")
	if err != nil {
		backTo(w, r, "/delivery/records", "", err.Error())
		return nil, nil
	}
	done, refused := 0, 0
	for _, x := range res {
		if x.Requeued {
			done++
		} else {
			refused++
		}
	}
	backTo(w, r, "/delivery/records", fmt.Sprintf(v.Zh("已重投 %d 条，未重投 %d 条（状态已变化或等待 ACK）", "Requeued %d, refused %d (changed or awaiting ACK)"), done, refused), "")
	return nil, nil
}
