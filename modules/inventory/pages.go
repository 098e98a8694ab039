package inventory

import (
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/module/web/console"
	"github.com/keelwork/keel/modules/inventory/domain"
	"github.com/keelwork/keel/modules/inventory/store"
)

//go:embed templates/*.html
var templateFiles embed.FS

var pageTemplates = console.Parse(templateFiles, template.FuncMap{
	"when":   web.Time,
	"reason": func(v *module.View, s string) string { return web.ReasonWord(v.Lang, Name, s, nil) },
	"word":   func(v *module.View, s string) string { return console.Word(v, domain.Words, s, "未知", "unknown") },
	"conflictWord": func(v *module.View, kind string) string {
		return console.Word(v, conflictWords, kind, "其他冲突", "other conflict")
	},
	"conflictState": func(v *module.View, s string) string { return console.Word(v, conflictStates, s, "未知", "unknown") },
})

var conflictWords = map[string][2]string{
	"confirm_after_released":  {"释放后到达的出库确认", "a confirm after the release"},
	"release_after_confirmed": {"确认后到达的释放", "a release after the confirm"},
	"release_after_returning": {"退货中到达的释放", "a release during the return"},
	"release_after_returned":  {"退回后到达的释放", "a release after the return"},
	"timeout_unknown":         {"超时检查无法确认，转人工", "timeout check could not tell: manual"},
}

var conflictStates = map[string][2]string{
	"open":              {"待处理", "open"},
	"awaiting_approval": {"等待第二人审批", "awaiting a second approver"},
	"resolved":          {"已处理", "resolved"},
}

func (m *Module[TTx]) pages() []module.Page {
	v, o, a := module.RoleViewer, module.RoleOperator, module.RoleAdmin
	return []module.Page{
		{Pattern: "GET /inventory", Role: v, Handle: m.pageStock},
		{Pattern: "POST /inventory/admission", Role: a, Handle: m.pageAdmission},
		{Pattern: "GET /inventory/reservations", Role: v, Handle: m.pageReservations},
		{Pattern: "GET /inventory/reservations/{id}", Role: v, Handle: m.pageReservation},
		{Pattern: "GET /inventory/conflicts", Role: v, Handle: m.pageConflicts},
		{Pattern: "GET /inventory/conflicts/{id}", Role: v, Handle: m.pageConflict},
		{Pattern: "POST /inventory/conflicts/{id}/resolve", Role: o, Handle: m.pageResolve},
		{Pattern: "POST /inventory/approvals/{id}/approve", Role: o, Handle: m.pageApprove},
	}
}

func (m *Module[TTx]) render(v *module.View, name, zh, en string, data any) (*module.Rendered, error) {
	return pageTemplates.Render(name, v.Zh(zh, en), "/inventory", data)
}

func (m *Module[TTx]) pageStock(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	rows, err := m.StockList(r, r.URL.Query().Get("warehouse"), "", "", 500)
	if err != nil {
		return nil, err
	}
	return m.render(v, "stock", "库存", "Stock", map[string]any{"V": v, "Rows": rows, "Adm": m.Admission(), "Co": m.Coalescing()})
}

func (m *Module[TTx]) pageAdmission(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	err := m.SetBusy(keel.WithActor(r.Context(), v.Actor), r.PostFormValue("busy") == "true", r.PostFormValue("reason"))
	return done(w, r, v, "/inventory", err)
}

func (m *Module[TTx]) pageReservations(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	q := web.NewQuery(r, "state", "after")
	state, after := q.Get("state"), q.AfterID("reservations")
	if q.Err != nil {
		return nil, q.Err
	}
	if state != "" && !validState(state) {
		return nil, web.Invalid("unknown state")
	}
	rows, err := m.listReservations(r, state, after, 100)
	if err != nil {
		return nil, err
	}
	next := ""
	if len(rows) == 100 {
		next = web.IDCursor("reservations", rows[len(rows)-1].ID)
	}
	type st struct{ Key, Word string }
	var states []st
	for _, s := range domain.States {
		if s != domain.Pending {
			states = append(states, st{string(s), v.Zh(domain.Words[string(s)][0], domain.Words[string(s)][1])})
		}
	}
	return m.render(v, "reservations", "预占单", "Reservations", map[string]any{"V": v, "Rows": rows, "State": state,
		"Next": next, "States": states})
}

func validState(s string) bool {
	for _, x := range domain.States {
		if string(x) == s {
			return true
		}
	}
	return false
}

func (m *Module[TTx]) pageReservation(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	id, err := web.PathID(r, "id")
	if err != nil {
		return nil, err
	}
	d, err := m.GetReservation(r, id)
	if err != nil {
		return nil, err
	}
	all, err := m.st.ListConflicts(r.Context(), m.db, "", math.MaxInt64, 500)
	if err != nil {
		return nil, err
	}
	var mine []store.Conflict
	for _, c := range all {
		if c.ReservationID == id {
			mine = append(mine, c)
		}
	}
	return m.render(v, "reservation", "预占单详情", "Reservation", map[string]any{"V": v, "D": d, "Conflicts": mine})
}

func (m *Module[TTx]) pageConflicts(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	rows, err := m.st.ListConflicts(r.Context(), m.db, "", math.MaxInt64, 200)
	if err != nil {
		return nil, err
	}
	return m.render(v, "conflicts", "冲突核验", "Conflicts", map[string]any{"V": v, "Rows": rows})
}

type evidenceLine struct{ Label, Text string }

func (m *Module[TTx]) pageConflict(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	id, err := web.PathID(r, "id")
	if err != nil {
		return nil, err
	}
	c, err := m.st.GetConflict(r.Context(), m.db, id)
	if errors.Is(err, store.ErrNoRows) {
		return nil, web.NotFound("conflict %d", id)
	}
	if err != nil {
		return nil, err
	}
	var ev map[string]json.RawMessage
	_ = json.Unmarshal([]byte(c.Evidence), &ev)
	labels := map[string][2]string{"request": {"迟到的请求", "The late request"}, "reservation": {"预占单", "Reservation"},
		"ledger": {"库存流水", "Ledger"}, "stock": {"库存余额", "Balance"}, "detail": {"说明", "Detail"},
		"action": {"动作", "Action"}, "checks": {"检查次数", "Checks"}}
	var lines []evidenceLine
	keys := make([]string, 0, len(ev))
	for k := range ev {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		l, ok := labels[k]
		if !ok {
			l = [2]string{k, k}
		}
		lines = append(lines, evidenceLine{Label: v.Zh(l[0], l[1]), Text: describe(ev[k])})
	}
	var approval int64
	if c.AdjustmentID != 0 && m.approvals() != nil {
		a, err := m.st.GetAdjustment(r.Context(), m.db, c.AdjustmentID)
		if err == nil {
			list, err := m.approvals().List(r.Context(), keelrecon.ApprovalFilter{Kind: ApprovalKind, State: keelrecon.ApprovalPending, Limit: 500})
			if err == nil {
				for _, ap := range list {
					if ap.ActionID == a.Intent {
						approval = ap.ID
					}
				}
			}
		}
	}
	return m.render(v, "conflict", "冲突核验", "Conflict", map[string]any{"V": v, "C": c, "Evidence": lines, "ApprovalID": approval})
}

// describe renders a piece of evidence as "field: value" words, not JSON.
func describe(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return ""
	}
	var b strings.Builder
	var walk func(prefix string, x any)
	walk = func(prefix string, x any) {
		switch t := x.(type) {
		case map[string]any:
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(strings.TrimPrefix(prefix+"."+k, "."), t[k])
			}
		case []any:
			for i, e := range t {
				walk(prefix+"["+strconv.Itoa(i+1)+"]", e)
			}
		case nil:
		default:
			if b.Len() > 0 {
				b.WriteString("；")
			}
			if prefix != "" {
				b.WriteString(prefix + " = ")
			}
			b.WriteString(strings.TrimSpace(strings.Trim(string(mustJSON(t)), `"`)))
		}
	}
	walk("", v)
	return b.String()
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

func (m *Module[TTx]) pageResolve(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	id, err := web.PathID(r, "id")
	if err != nil {
		return nil, err
	}
	back := "/inventory/conflicts/" + strconv.FormatInt(id, 10)
	delta, perr := strconv.ParseInt(strings.TrimSpace(r.PostFormValue("delta")), 10, 64)
	if perr != nil {
		return done(w, r, v, back, web.Invalid("delta must be an integer"))
	}
	_, err = m.ResolveConflict(keel.WithActor(r.Context(), v.Actor), id, ResolveRequest{Delta: delta, Reason: r.PostFormValue("reason")})
	return done(w, r, v, back, err)
}

func (m *Module[TTx]) pageApprove(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	id, err := web.PathID(r, "id")
	if err != nil {
		return nil, err
	}
	back := r.PostFormValue("back")
	if !strings.HasPrefix(back, "/inventory/") || strings.ContainsAny(back, "\\\r\n?#") {
		back = "/inventory/conflicts"
	}
	if m.approvals() == nil {
		return done(w, r, v, back, ErrState)
	}
	_, err = m.approvals().Approve(keel.WithActor(r.Context(), v.Actor), id, r.PostFormValue("reason"))
	return done(w, r, v, back, err)
}

// done redirects after a form post with the outcome in words.
func done(w http.ResponseWriter, r *http.Request, v *module.View, back string, err error) (*module.Rendered, error) {
	if err != nil {
		return console.Redirect(w, r, back, "", problemWords(v, err))
	}
	return console.Redirect(w, r, back, v.Zh("已完成", "Done"), "")
}

// problemWords says what went wrong in the view's language.
func problemWords(v *module.View, err error) string {
	switch {
	case errors.Is(err, keelrecon.ErrSelfApproval):
		return v.Zh("不能审批自己提交的调整，需要另一位操作员", "You cannot approve your own request: another operator must")
	case errors.Is(err, ErrState):
		return v.Zh("当前状态不允许此操作（例如调整会使可用量小于零）", "Not allowed now (for example the adjustment would make available negative)")
	case errors.Is(err, ErrBusy):
		return v.Zh("库存繁忙，请稍后重试", "Inventory busy: retry later")
	case errors.Is(err, domain.ErrInvalid):
		return v.Zh("输入不正确：数量须为非零整数，原因至少 4 个字", "Invalid input: a non-zero quantity and a reason of at least 4 characters")
	case errors.Is(err, ErrNotFound):
		return v.Zh("记录不存在", "Not found")
	}
	if p, ok := web.As(err); ok && p.Status < 500 {
		return v.Zh("请求不正确", "Bad request")
	}
	return v.Zh("操作失败，请稍后重试", "The action failed: retry later")
}
