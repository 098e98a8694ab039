// Package eventsweb is the operators' surface of the events backbone and of
// reconciliation: API routes and console pages (Chinese first) for outbox
// backlog per topic, consumers with their lag, quarantined and manual
// events (inspect, replay), reconciliation runs and discrepancies (filter,
// evidence side by side, request, approve, reject, execute) and the
// approvals awaiting the operator. It is a module.Web the server hosts like
// a business module's.
package eventsweb

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"github.com/keelwork/keel/module/web"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"
	_ "time/tzdata" // the console's zone must load on hosts without tzdata

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
)

// Name is the surface's name among the server's modules.
const Name = "events"

// DefaultZone is the zone times are shown in unless Config.Zone says
// otherwise.
const DefaultZone = "Asia/Shanghai"

// Problem codes of the surface, in the server's catalogue.
const (
	CodeSelfApproval     = "self_approval"
	CodeApprovalRequired = "approval_required"
	CodeAlreadyExecuted  = "already_executed"
	CodeReplayFailed     = "replay_failed"
	// CodeNotRegistered: a manual event's consumer does not run in this
	// process, so its handler cannot replay it here.
	CodeNotRegistered = "consumer_not_registered"
)

// Config configures the surface.
type Config[TTx any] struct {
	// Recon is reconciliation and the approvals. Required.
	Recon *keelrecon.Recon[TTx]
	// Events is the events backbone; without it the events pages and
	// routes are left out.
	Events *keelevents.Events[TTx]
	// Zone shows times. Default DefaultZone.
	Zone *time.Location
}

// Web serves the API routes and console pages.
type Web[TTx any] struct {
	recon  *keelrecon.Recon[TTx]
	events *keelevents.Events[TTx]
	zone   *time.Location
	tmpl   *template.Template
}

var _ module.Web = (*Web[any])(nil)

//go:embed templates/*.html
var templateFiles embed.FS

// New builds the surface.
func New[TTx any](cfg *Config[TTx]) (*Web[TTx], error) {
	if cfg == nil || cfg.Recon == nil {
		return nil, errors.New("eventsweb: Config.Recon is required")
	}
	w := &Web[TTx]{recon: cfg.Recon, events: cfg.Events, zone: cfg.Zone}
	if w.zone == nil {
		z, err := time.LoadLocation(DefaultZone)
		if err != nil {
			return nil, fmt.Errorf("eventsweb: loading %s: %w", DefaultZone, err)
		}
		w.zone = z
	}
	t, err := template.New("").Funcs(template.FuncMap{
		"targetID": func(target string) string {
			if i := strings.LastIndexByte(target, ':'); i >= 0 {
				return target[i+1:]
			}
			return ""
		},
		"dict": func(kv ...any) map[string]any {
			m := make(map[string]any, len(kv)/2)
			for i := 0; i+1 < len(kv); i += 2 {
				m[fmt.Sprint(kv[i])] = kv[i+1]
			}
			return m
		},
	}).ParseFS(templateFiles, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("eventsweb: templates: %w", err)
	}
	w.tmpl = t
	return w, nil
}

// Name implements module.Web.
func (w *Web[TTx]) Name() string { return Name }

// Nav implements module.Web.
func (w *Web[TTx]) Nav() []module.NavItem {
	var nav []module.NavItem
	if w.events != nil {
		nav = append(nav, module.NavItem{Path: "/events", ZH: "事件总线", EN: "Events"})
	}
	return append(nav, []module.NavItem{
		{Path: "/recon/discrepancies", ZH: "对账差异", EN: "Discrepancies"},
		{Path: "/recon/runs", ZH: "对账任务", EN: "Reconciliation runs"},
		{Path: "/approvals", ZH: "待我审批", EN: "My approvals"},
	}...)
}

// Routes implements module.Web.
func (w *Web[TTx]) Routes() []module.Route {
	v, o := module.RoleViewer, module.RoleOperator
	return append(w.eventRoutes(), []module.Route{
		{Pattern: "GET /api/v1/recon/reconcilers", Role: v, Handle: w.apiReconcilers},
		{Pattern: "GET /api/v1/recon/runs", Role: v, Handle: w.apiRuns},
		{Pattern: "POST /api/v1/recon/runs", Role: o, Handle: w.apiRunNow},
		{Pattern: "GET /api/v1/recon/runs/{id}", Role: v, Handle: w.apiRun},
		{Pattern: "GET /api/v1/recon/discrepancies", Role: v, Handle: w.apiDiscrepancies},
		{Pattern: "GET /api/v1/recon/discrepancies/{id}", Role: v, Handle: w.apiDiscrepancy},
		{Pattern: "POST /api/v1/recon/discrepancies/{id}/{action}", Role: o, Handle: w.apiDiscrepancyAction},
		{Pattern: "GET /api/v1/approvals", Role: v, Handle: w.apiApprovals},
		{Pattern: "GET /api/v1/approvals/{id}", Role: v, Handle: w.apiApproval},
		{Pattern: "POST /api/v1/approvals/{id}/{action}", Role: o, Handle: w.apiApprovalAction},
	}...)
}

// Pages implements module.Web.
func (w *Web[TTx]) Pages() []module.Page {
	v, o := module.RoleViewer, module.RoleOperator
	return append(w.eventPages(), []module.Page{
		{Pattern: "GET /recon/runs", Role: v, Handle: w.pageRuns},
		{Pattern: "POST /recon/runs", Role: o, Handle: w.pageRunNow},
		{Pattern: "GET /recon/runs/{id}", Role: v, Handle: w.pageRun},
		{Pattern: "GET /recon/discrepancies", Role: v, Handle: w.pageDiscrepancies},
		{Pattern: "GET /recon/discrepancies/{id}", Role: v, Handle: w.pageDiscrepancy},
		{Pattern: "POST /recon/discrepancies/{id}/{action}", Role: o, Handle: w.pageDiscrepancyAction},
		{Pattern: "GET /approvals", Role: v, Handle: w.pageApprovals},
		{Pattern: "POST /approvals/{id}/{action}", Role: o, Handle: w.pageApprovalAction},
	}...)
}

// problem maps reconciliation errors to the catalogue's codes; the
// engine's sentinels pass through (the server maps them itself).
func problem(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, keelrecon.ErrSelfApproval):
		return module.Errorf(http.StatusForbidden, CodeSelfApproval, "%s", err.Error())
	case errors.Is(err, keelrecon.ErrApprovalRequired):
		return module.Errorf(http.StatusConflict, CodeApprovalRequired, "%s", err.Error())
	case errors.Is(err, keelrecon.ErrAlreadyExecuted):
		return module.Errorf(http.StatusConflict, CodeAlreadyExecuted, "%s", err.Error())
	case errors.Is(err, keelevents.ErrInvalid):
		return module.Invalid("%s", err.Error())
	case errors.Is(err, keelevents.ErrNotFound):
		return module.Errorf(http.StatusNotFound, "not_found", "%s", err.Error())
	case errors.Is(err, keelevents.ErrNotRegistered):
		return module.Errorf(http.StatusConflict, CodeNotRegistered, "%s", err.Error())
	}
	return err
}

// problemText says what went wrong in the operator's language.
func problemText(v *module.View, err error) string {
	var rf *replayFailed
	switch {
	case errors.As(err, &rf):
		return v.Zh("重放失败：处理程序再次出错（"+rf.err.Error()+"），事件仍待人工处理。",
			"The replay failed: the handler failed again ("+rf.err.Error()+"); the event stays manual.")
	case errors.Is(err, keelevents.ErrNotRegistered):
		return v.Zh("该事件的消费者未在本服务中运行（可能已下线或由其他服务承载），无法在此重放；事件仍待人工处理。",
			"This event's consumer does not run in this service (removed, or served elsewhere), so it cannot be replayed here; the event stays manual.")
	case errors.Is(err, keelrecon.ErrSelfApproval):
		return v.Zh("不能审批或驳回自己提交的申请，需要另一位操作员。", "You cannot decide your own request: another operator must.")
	case errors.Is(err, keelrecon.ErrApprovalRequired):
		return v.Zh("该处理需要另一位操作员审批后才能执行。", "This action needs another operator's approval before it is executed.")
	case errors.Is(err, keelrecon.ErrAlreadyExecuted):
		return v.Zh("该处理已执行过，没有重复执行。", "This action was executed already; it was not executed again.")
	case errors.Is(err, keeltype.ErrNotFound), errors.Is(err, keelevents.ErrNotFound):
		return v.Zh("找不到该记录。", "No such record.")
	case errors.Is(err, keeltype.ErrInvalidArgument), errors.Is(err, keelevents.ErrInvalid):
		return v.Zh(fmt.Sprintf("输入无效：原因需 %d 至 %d 个字符，且不能含控制字符。", keelrecon.MinReason, keelrecon.MaxReason),
			fmt.Sprintf("Invalid input: a reason of %d to %d characters without control characters.", keelrecon.MinReason, keelrecon.MaxReason))
	case errors.Is(err, keeltype.ErrInvalidState):
		return v.Zh("当前状态不允许该操作（可能已被他人处理），请刷新后查看。", "Not allowed in the current state (someone may have acted already); reload to see.")
	}
	return v.Zh("操作失败，请稍后重试。", "The action failed; try again later.")
}

// pathID reads a positive id from the path.
func pathID(r *http.Request) (int64, error) { return web.PathID(r, "id") }

// apiPathID is pathID for the API's routes, which take no query
// parameters: one that is sent is refused rather than ignored.
func apiPathID(r *http.Request) (int64, error) {
	if q := web.NewQuery(r); q.Err != nil {
		return 0, q.Err
	}
	return pathID(r)
}

// withActor names the console's operator for the audit.
func withActor(r *http.Request, v *module.View) *http.Request {
	if v == nil || v.Actor == "" {
		return r
	}
	return r.WithContext(keel.WithActor(r.Context(), v.Actor))
}

func (w *Web[TTx]) render(name, title, nav string, data any) (*module.Rendered, error) {
	var buf bytes.Buffer
	if err := w.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		return nil, fmt.Errorf("rendering %s: %w", name, err)
	}
	return &module.Rendered{Title: title, Nav: nav, Body: template.HTML(buf.String())}, nil
}

// done redirects after a form post with the outcome in words.
func done(w http.ResponseWriter, r *http.Request, v *module.View, back string, err error) (*module.Rendered, error) {
	sep := "?"
	if strings.Contains(back, "?") {
		sep = "&"
	}
	if err != nil {
		back += sep + "err=" + url.QueryEscape(problemText(v, err))
	} else {
		back += sep + "flash=" + url.QueryEscape(v.Zh("已完成", "Done"))
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
	return nil, nil
}

// actorOf is who the request acts as (the server authenticated it).
func actorOf(r *http.Request) string { return keel.ActorFrom(r.Context()) }
