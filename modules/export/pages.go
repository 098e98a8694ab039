package export

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/module/web/console"
)

//go:embed templates/*.html
var templateFiles embed.FS

// Operator words for states (Chinese first).
var stateWords = map[string][2]string{
	StateRunning:     {"导出中", "exporting"},
	StateMerging:     {"合并校验中", "merging and verifying"},
	StateSucceeded:   {"已完成，可下载", "done, ready to download"},
	StateFailed:      {"失败", "failed"},
	StateCancelled:   {"已取消", "cancelled"},
	StateQuarantined: {"已隔离，待人工处理", "quarantined, needs an operator"},
	"pending":        {"待执行", "waiting"},
	"done":           {"已完成", "done"},
	"delivered":      {"已通知", "notified"},
	"":               {"—", "—"},
}

// columnWords name the export's columns for the operator; the file's
// header keeps the column's own name, shown beside the words so the
// operator knows what the file will say.
var columnWords = map[string][2]string{
	"id":           {"编号", "ID"},
	"order_no":     {"订单号", "Order number"},
	"customer":     {"客户", "Customer"},
	"amount_minor": {"金额（分）", "Amount (minor units)"},
	"currency":     {"币种", "Currency"},
	"status":       {"订单状态", "Order status"},
	"created_at":   {"下单时间（UTC）", "Ordered at (UTC)"},
}

var pageTemplates = console.Parse(templateFiles, template.FuncMap{
	"word": func(v *module.View, s string) string { return console.Word(v, stateWords, s, "未知", "unknown") },
	"col": func(v *module.View, c string) string {
		if w, ok := columnWords[c]; ok {
			return v.Zh(w[0], w[1]) + " (" + c + ")"
		}
		return c
	},
	"pct": func(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) },
	// ts is a time outside a time column, with its zone; when is one in
	// a column whose head names the zone (View.TimeHead).
	"ts":   func(v *module.View, t any) string { return v.TimeZoned(t) },
	"when": web.Time,
})

// site is the export centre.
func (m *Module[TTx]) site() console.Site {
	v, o := module.RoleViewer, module.RoleOperator
	return console.Site{
		{Pattern: "GET /exports", Role: v, Handle: m.pageList, ZH: "导出中心", EN: "Export centre"},
		{Pattern: "POST /exports", Role: o, Handle: m.pageCreate},
		{Pattern: "GET /exports/{id}", Role: v, Handle: m.pageTask},
		{Pattern: "POST /exports/{id}/cancel", Role: o, Handle: m.pageCancel},
		{Pattern: "POST /exports/{id}/retry", Role: o, Handle: m.pageRetry},
		{Pattern: "GET /exports/{id}/file", Role: v, Handle: m.pageFile},
	}
}

// Pages implements module.Web.
func (m *Module[TTx]) Pages() []module.Page { return m.site().Pages() }

// Nav implements module.Web.
func (m *Module[TTx]) Nav() []module.NavItem { return m.site().Nav() }

func (m *Module[TTx]) page(v *module.View, name, zh, en string, data map[string]any) (*module.Rendered, error) {
	data["V"] = v
	return pageTemplates.Render(name, v.Zh(zh, en), "/exports", data)
}

func (m *Module[TTx]) pageList(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	ts, err := m.Tasks(r.Context(), "", "", 0, 100)
	if err != nil {
		return nil, err
	}
	views := make([]TaskView, len(ts))
	for i, t := range ts {
		views[i] = TaskView{Task: t, Progress: t.Progress()}
	}
	return m.page(v, "list", "导出中心", "Export centre", map[string]any{"Tasks": views, "Columns": Columns})
}

func (m *Module[TTx]) pageTask(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	id, err := web.PathID(r, "id")
	if err != nil {
		return nil, err
	}
	tv, err := m.view(r.Context(), id)
	if err != nil {
		return nil, err
	}
	return m.page(v, "task", fmt.Sprintf("导出 #%d", id), fmt.Sprintf("Export #%d", id), map[string]any{"T": tv})
}

// refusalWords are the operator's sentences for the refusals a form of
// the export centre can meet.
var refusalWords = map[string][2]string{
	CodeUnknownColumn:     {"包含未知的列", "An unknown column was chosen"},
	CodeUnknownFilter:     {"包含未知的筛选条件", "An unknown filter was given"},
	CodeForbidden:         {"你没有该租户的导出权限（或金额列权限）", "You lack the export permission (or the amount permission) in this tenant"},
	CodeTooLarge:          {"导出行数超过上限，请缩小筛选范围", "The export is over the row limit: narrow the filters"},
	CodeUnsupportedFormat: {"不支持该文件格式", "That file format is not supported"},
	CodeUserBusy:          {"你进行中的导出已达上限，请等待完成或取消一个", "You have the most exports running allowed: wait or cancel one"},
	CodeTenantBusy:        {"该租户进行中的导出已达上限", "The tenant has the most exports running allowed"},
	CodeNotReady:          {"文件尚未生成", "The file is not ready yet"},
	web.CodeInvalidState:  {"当前状态不允许该操作", "Not allowed in the current state"},
}

// problemWords turns a refusal into an operator sentence; a refusal of
// the input without words of its own says what the check found.
func problemWords(v *module.View, err error) string {
	var pe *module.Error
	if !errors.As(err, &pe) {
		return v.Zh("操作失败，请稍后重试", "The action failed; try again later")
	}
	return console.Word(v, refusalWords, pe.Code, "输入有误："+pe.Detail, "Invalid input: "+pe.Detail)
}

func (m *Module[TTx]) pageCreate(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	if err := r.ParseForm(); err != nil {
		return nil, err
	}
	req := Request{Tenant: strings.TrimSpace(r.PostFormValue("tenant")), Format: r.PostFormValue("format"),
		Gzip: r.PostFormValue("gzip") == "on", BOM: r.PostFormValue("bom") == "on", NewVersion: r.PostFormValue("new_version") == "on"}
	req.Columns = r.PostForm["columns"]
	if s := r.PostFormValue("status"); s != "" {
		req.Filters = map[string]string{"status": s}
	}
	t, err := m.Create(keel.WithActor(r.Context(), v.Actor), req)
	if err != nil {
		v.Error = problemWords(v, err)
		return m.pageList(w, r, v)
	}
	return console.Redirect(w, r, fmt.Sprintf("/exports/%d", t.ID), "", "")
}

func (m *Module[TTx]) pageCancel(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	return m.pageAct(w, r, v, m.Cancel)
}

func (m *Module[TTx]) pageRetry(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	return m.pageAct(w, r, v, m.Retry)
}

func (m *Module[TTx]) pageAct(w http.ResponseWriter, r *http.Request, v *module.View, act func(ctx context.Context, id int64, reason string) (*Task, error)) (*module.Rendered, error) {
	id, err := web.PathID(r, "id")
	if err != nil {
		return nil, err
	}
	reason, err := web.Reason(r.PostFormValue("reason"), true)
	if err == nil {
		_, err = act(keel.WithActor(r.Context(), v.Actor), id, reason)
	}
	if err != nil {
		v.Error = problemWords(v, err)
		return m.pageTask(w, r, v)
	}
	return console.Redirect(w, r, fmt.Sprintf("/exports/%d", id), "", "")
}

func (m *Module[TTx]) pageFile(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	id, err := web.PathID(r, "id")
	if err != nil {
		return nil, err
	}
	if err := m.Download(keel.WithActor(r.Context(), v.Actor), id, w); err != nil {
		v.Error = problemWords(v, err)
		return m.pageTask(w, r, v)
	}
	return nil, nil
}
