package tracking

import (
	"embed"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
	mweb "github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/store"
)

//go:embed templates/*.html
var templateFiles embed.FS

var pageTemplates = template.Must(template.New("").ParseFS(templateFiles, "templates/*.html"))

// Nav implements module.Web.
func (m *Module[TTx]) Nav() []module.NavItem {
	return []module.NavItem{
		{Path: "/tracking", ZH: "轨迹查询", EN: "Tracking"},
		{Path: "/tracking/carriers", ZH: "承运商健康", EN: "Carrier health"},
	}
}

// Pages implements module.Web.
func (m *Module[TTx]) Pages() []module.Page {
	v, o, a := module.RoleViewer, module.RoleOperator, module.RoleAdmin
	return []module.Page{
		{Pattern: "GET /tracking", Role: v, Handle: m.pageSearch},
		{Pattern: "GET /tracking/waybills/{carrier}/{waybill}", Role: v, Handle: m.pageWaybill},
		{Pattern: "POST /tracking/waybills/{carrier}/{waybill}/refresh", Role: o, Handle: m.pageRefresh},
		{Pattern: "GET /tracking/carriers", Role: v, Handle: m.pageCarriers},
		{Pattern: "GET /tracking/carriers/{carrier}/mappings", Role: v, Handle: m.pageMappings},
		{Pattern: "POST /tracking/carriers/{carrier}/mappings/{version}/replay", Role: o, Handle: m.pageReplay},
		{Pattern: "POST /tracking/carriers/{carrier}/mappings/{version}/activate", Role: a, Handle: m.pageActivate},
	}
}

// page is what every template gets.
type page struct {
	V *module.View
}

func (p page) CanOperate() bool { return p.V.Can(module.RoleOperator) }

func (p page) T(zh, en string) string        { return p.V.Zh(zh, en) }
func (p page) When(t time.Time) string       { return mweb.Time(t) }
func (p page) Zone() string                  { return mweb.ZoneLabel(p.V.Lang) }
func (p page) Milestone(s string) string     { return domain.Milestone(s).Word(p.V.Lang) }
func (p page) Flags(v domain.View) []string  { return v.Flags(p.V.Lang) }
func (p page) Pct(f float64) int             { return int(f*100 + 0.5) }
func (p page) Name(c *domain.Carrier) string { return c.Name(p.V.Lang) }
func (p page) WhenP(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return mweb.Time(*t)
}

var outcomeWords = map[string][2]string{
	"advanced": {"已推进", "Advanced"}, "detail": {"补充明细", "Detail only"}, "unordered": {"顺序无法证明（待人工）", "Order unproven (manual)"},
	"unmapped": {"待映射", "Awaiting mapping"}, "received": {"已接收", "Received"}, "collision": {"碰撞隔离", "Collision"},
}

func (p page) Outcome(s string) string {
	w, ok := outcomeWords[s]
	if !ok {
		return s
	}
	return p.V.Zh(w[0], w[1])
}

var breakerWords = map[keeltype.BreakerState][2]string{
	keeltype.BreakerClosed: {"正常", "Closed"}, keeltype.BreakerOpen: {"熔断中", "Open"}, keeltype.BreakerHalfOpen: {"半开探测", "Half-open"},
}

func (p page) Breaker(s keeltype.BreakerState) string {
	w, ok := breakerWords[s]
	if !ok {
		return string(s)
	}
	return p.V.Zh(w[0], w[1])
}

func (p page) Via(s string) string {
	return map[string]string{"webhook": p.T("推送", "Push"), "pull": p.T("补拉/查询", "Pull")}[s]
}

func render(name, title, nav string, data any) (*module.Rendered, error) {
	return module.Render(pageTemplates, name, title, nav, data)
}

func redirect(w http.ResponseWriter, r *http.Request, to, flash, errText string) (*module.Rendered, error) {
	q := url.Values{}
	if flash != "" {
		q.Set("flash", flash)
	}
	if errText != "" {
		q.Set("err", errText)
	}
	if len(q) > 0 {
		to += "?" + q.Encode()
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
	return nil, nil
}

func (m *Module[TTx]) pageSearch(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	q, carrier, limit, err := m.searchParams(r)
	if err != nil {
		return nil, err
	}
	ws, err := m.search(r.Context(), q, carrier, limit)
	if err != nil {
		return nil, err
	}
	hs, err := m.Healths(r.Context())
	if err != nil {
		return nil, err
	}
	data := struct {
		page
		Q, Carrier string
		Carriers   []*domain.Carrier
		Waybills   []store.Waybill
		Healths    []*Health
	}{page{v}, q, carrier, m.carriers, ws, hs}
	return render("search", v.Zh("轨迹查询", "Tracking"), "/tracking", data)
}

func (m *Module[TTx]) pageWaybill(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	c, wb, err := m.pathWaybill(r)
	if err != nil {
		return nil, err
	}
	d, err := m.detail(r.Context(), c, wb)
	if err != nil {
		return nil, err
	}
	h, err := m.health(r.Context(), c.Code)
	if err != nil {
		return nil, err
	}
	data := struct {
		page
		C *domain.Carrier
		D *WaybillDetail
		H *Health
	}{page{v}, c, d, h}
	return render("waybill", v.Zh("运单", "Waybill")+" "+wb, "/tracking", data)
}

func (m *Module[TTx]) pageRefresh(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	c, wb, err := m.pathWaybill(r)
	if err != nil {
		return nil, err
	}
	back := "/tracking/waybills/" + c.Code + "/" + wb
	if _, err := m.Refresh(keel.WithActor(r.Context(), v.Actor), c.Code, wb); err != nil {
		return redirect(w, r, back, "", v.Zh("未能排队实时查询", "Could not queue a realtime query"))
	}
	return redirect(w, r, back, v.Zh("已排队实时查询（占用实时配额）", "Realtime query queued (realtime share)"), "")
}

func (m *Module[TTx]) pageCarriers(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	hs, err := m.Healths(r.Context())
	if err != nil {
		return nil, err
	}
	sec, err := m.store.SecurityCounts(r.Context())
	if err != nil {
		return nil, err
	}
	data := struct {
		page
		Healths  []*Health
		Security []store.SecurityRow
	}{page{v}, hs, sec}
	return render("carriers", v.Zh("承运商健康", "Carrier health"), "/tracking/carriers", data)
}

func (m *Module[TTx]) pageMappings(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	c, err := m.carrier(r.PathValue("carrier"))
	if err != nil {
		return nil, err
	}
	mv, err := m.mappings(r.Context(), c)
	if err != nil {
		return nil, err
	}
	data := struct {
		page
		C        *domain.Carrier
		M        *MappingsView
		CanAdmin bool
		CanOp    bool
	}{page{v}, c, mv, v.Can(module.RoleAdmin), v.Can(module.RoleOperator)}
	return render("mappings", v.Zh("映射版本", "Mapping versions")+" · "+c.Name(v.Lang), "/tracking/carriers", data)
}

func (m *Module[TTx]) pageReplay(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	c, ver, err := m.pathVersion(r)
	if err != nil {
		return nil, err
	}
	back := "/tracking/carriers/" + c.Code + "/mappings"
	res, err := m.ReplayMapping(keel.WithActor(r.Context(), v.Actor), c.Code, ver, v.Actor)
	if err != nil {
		return redirect(w, r, back, "", v.Zh("回放失败", "Replay failed"))
	}
	return redirect(w, r, back, v.Zh("回放完成：", "Replayed: ")+strconv.FormatInt(res.Changed, 10)+v.Zh(" 个运单会改变里程碑", " waybills would change milestone"), "")
}

func (m *Module[TTx]) pageActivate(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	c, ver, err := m.pathVersion(r)
	if err != nil {
		return nil, err
	}
	back := "/tracking/carriers/" + c.Code + "/mappings"
	reason, err := mweb.Reason(r.PostFormValue("reason"), true)
	if err != nil {
		return redirect(w, r, back, "", v.Zh("请填写至少 5 个字的原因", "Give a reason of at least 5 characters"))
	}
	n, err := m.ActivateMapping(keel.WithActor(r.Context(), v.Actor), c.Code, ver, v.Actor, reason)
	if errors.Is(err, ErrReplayFirst) {
		return redirect(w, r, back, "", v.Zh("请先回放并查看差异，再上线", "Replay and review the diff before rolling out"))
	}
	if err != nil {
		return redirect(w, r, back, "", v.Zh("上线失败：版本不是草稿", "Rollout refused: the version is not a draft"))
	}
	return redirect(w, r, back, v.Zh("已上线，待映射事件已处理：", "Rolled out; waiting events applied: ")+strconv.Itoa(n), "")
}
