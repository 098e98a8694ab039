package tracking

import (
	"embed"
	"errors"
	"net/http"
	"strconv"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
	mweb "github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/module/web/console"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/store"
)

//go:embed templates/*.html
var templateFiles embed.FS

var pageTemplates = console.Parse(templateFiles, nil)

// site is the tracking console: the search and the carriers are in the
// navigation, a waybill and a carrier's mappings are reached from them.
func (m *Module[TTx]) site() console.Site {
	v, o, a := module.RoleViewer, module.RoleOperator, module.RoleAdmin
	return console.Site{
		{Pattern: "GET /tracking", Role: v, Handle: m.pageSearch, ZH: "轨迹查询", EN: "Tracking"},
		{Pattern: "GET /tracking/waybills/{carrier}/{waybill}", Role: v, Handle: m.pageWaybill},
		{Pattern: "POST /tracking/waybills/{carrier}/{waybill}/refresh", Role: o, Handle: m.pageRefresh},
		{Pattern: "GET /tracking/carriers", Role: v, Handle: m.pageCarriers, ZH: "承运商健康", EN: "Carrier health"},
		{Pattern: "GET /tracking/carriers/{carrier}/mappings", Role: v, Handle: m.pageMappings},
		{Pattern: "POST /tracking/carriers/{carrier}/mappings/{version}/replay", Role: o, Handle: m.pageReplay},
		{Pattern: "POST /tracking/carriers/{carrier}/mappings/{version}/activate", Role: a, Handle: m.pageActivate},
	}
}

// Nav implements module.Web.
func (m *Module[TTx]) Nav() []module.NavItem { return m.site().Nav() }

// Pages implements module.Web.
func (m *Module[TTx]) Pages() []module.Page { return m.site().Pages() }

// page is what every tracking template gets: the console's envelope and
// the tracking words.
type page struct{ console.Page }

func (p page) Milestone(s string) string    { return domain.Milestone(s).Word(p.V.Lang) }
func (p page) Flags(v domain.View) []string { return v.Flags(p.V.Lang) }
func (p page) Pct(f float64) int            { return int(f*100 + 0.5) }

// Note says a mapping version's note: the module's own in words, a
// person's as typed.
func (p page) Note(s string) string          { return mweb.ReasonWord(p.V.Lang, Name, s, nil) }
func (p page) Name(c *domain.Carrier) string { return c.Name(p.V.Lang) }

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
	}{page{console.Page{V: v}}, q, carrier, m.carriers, ws, hs}
	return pageTemplates.Render("search", v.Zh("轨迹查询", "Tracking"), "/tracking", data)
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
	}{page{console.Page{V: v}}, c, d, h}
	return pageTemplates.Render("waybill", v.Zh("运单", "Waybill")+" "+wb, "/tracking", data)
}

func (m *Module[TTx]) pageRefresh(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	c, wb, err := m.pathWaybill(r)
	if err != nil {
		return nil, err
	}
	back := "/tracking/waybills/" + c.Code + "/" + wb
	if _, err := m.Refresh(keel.WithActor(r.Context(), v.Actor), c.Code, wb); err != nil {
		return console.Redirect(w, r, back, "", v.Zh("未能排队实时查询", "Could not queue a realtime query"))
	}
	return console.Redirect(w, r, back, v.Zh("已排队实时查询（占用实时配额）", "Realtime query queued (realtime share)"), "")
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
	}{page{console.Page{V: v}}, hs, sec}
	return pageTemplates.Render("carriers", v.Zh("承运商健康", "Carrier health"), "/tracking/carriers", data)
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
	}{page{console.Page{V: v}}, c, mv, v.Can(module.RoleAdmin), v.Can(module.RoleOperator)}
	return pageTemplates.Render("mappings", v.Zh("映射版本", "Mapping versions")+" · "+c.Name(v.Lang), "/tracking/carriers", data)
}

func (m *Module[TTx]) pageReplay(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	c, ver, err := m.pathVersion(r)
	if err != nil {
		return nil, err
	}
	back := "/tracking/carriers/" + c.Code + "/mappings"
	res, err := m.ReplayMapping(keel.WithActor(r.Context(), v.Actor), c.Code, ver, v.Actor)
	if err != nil {
		return console.Redirect(w, r, back, "", v.Zh("回放失败", "Replay failed"))
	}
	return console.Redirect(w, r, back, v.Zh("回放完成：", "Replayed: ")+strconv.FormatInt(res.Changed, 10)+v.Zh(" 个运单会改变里程碑", " waybills would change milestone"), "")
}

func (m *Module[TTx]) pageActivate(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	c, ver, err := m.pathVersion(r)
	if err != nil {
		return nil, err
	}
	back := "/tracking/carriers/" + c.Code + "/mappings"
	reason, err := mweb.Reason(r.PostFormValue("reason"), true)
	if err != nil {
		return console.Redirect(w, r, back, "", v.Zh("请填写至少 5 个字的原因", "Give a reason of at least 5 characters"))
	}
	n, err := m.ActivateMapping(keel.WithActor(r.Context(), v.Actor), c.Code, ver, v.Actor, reason)
	if errors.Is(err, ErrReplayFirst) {
		return console.Redirect(w, r, back, "", v.Zh("请先回放并查看差异，再上线", "Replay and review the diff before rolling out"))
	}
	if err != nil {
		return console.Redirect(w, r, back, "", v.Zh("上线失败：版本不是草稿", "Rollout refused: the version is not a draft"))
	}
	return console.Redirect(w, r, back, v.Zh("已上线，待映射事件已处理：", "Rolled out; waiting events applied: ")+strconv.Itoa(n), "")
}
