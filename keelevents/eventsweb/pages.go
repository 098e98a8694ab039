package eventsweb

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/web"
)

// pageSize is the rows of one console page.
const pageSize = 50

// base is what every template gets: the view, the zone and the words.
type base struct {
	V    *module.View
	Path string
	zone *time.Location
	// Awaiting counts the approvals the operator may decide (the badge).
	Awaiting int
}

func (w *Web[TTx]) base(r *http.Request, v *module.View) base {
	b := base{V: v, Path: r.URL.Path, zone: w.zone}
	if list, err := w.recon.Approvals().Awaiting(r.Context(), v.Actor, 100); err == nil {
		b.Awaiting = len(list)
	}
	return b
}

func (b base) T(zh, en string) string { return b.V.Zh(zh, en) }
func (b base) When(t time.Time) string {
	return When(b.V.Lang, t, b.zone)
}
func (b base) WhenP(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return When(b.V.Lang, *t, b.zone)
}
func (b base) Zone() string { return web.ZoneName(b.V.Lang, b.zone) }

// TimeHead is the head of a column of times shown by When: the name with
// the zone.
func (b base) TimeHead(zh, en string) string             { return web.TimeHead(b.V.Lang, zh, en, b.zone) }
func (b base) Money(minor int64, currency string) string { return Money(minor, currency) }
func (b base) State(s keelrecon.State) string            { return stateWords.in(string(s), b.V.Lang) }
func (b base) Class(c keelrecon.Class) string            { return classWords.in(string(c), b.V.Lang) }
func (b base) ApprovalState(s keelrecon.ApprovalState) string {
	return approvalWords.in(string(s), b.V.Lang)
}
func (b base) RunWord(s string) string { return runWords.in(s, b.V.Lang) }

// ReconWord, TopicWord and ConsumerWord name a reconciler, a topic and a consumer in
// the words their module registered (web.RegisterReconcilers, …); the
// templates keep the name itself in the title, links and filters.
func (b base) ReconWord(name string) string    { return web.ReconcilerWord(b.V.Lang, name) }
func (b base) TopicWord(topic string) string   { return web.TopicWord(b.V.Lang, topic) }
func (b base) ConsumerWord(name string) string { return web.ConsumerWord(b.V.Lang, name) }
func (b base) Source(s string) string          { return sourceWords.in(s, b.V.Lang) }

// Suggested is a reconciler's suggested action in the page's language:
// its words without what Execute keeps of it (SuggestedWords), the half of
// a "中文 / English" pair, or the words its module registered
// (web.RegisterReasons under the reconciler's namespace, "payment" for
// "payment.channel"); else as written.
func (b base) Suggested(reconciler, s string) string {
	w := SuggestedWords(s)
	if zh, en, ok := strings.Cut(w, " / "); ok && hasHan(zh) && !hasHan(en) {
		return b.V.Zh(strings.TrimSpace(zh), strings.TrimSpace(en))
	}
	scope, _, _ := strings.Cut(reconciler, ".")
	return web.ReasonWord(b.V.Lang, scope, w, nil)
}

// Pair is the half of a "中文 · English" text a module wrote in both
// languages (a run's scope) for the page's language; else as written.
func (b base) Pair(s string) string {
	if zh, en, ok := strings.Cut(s, " · "); ok && hasHan(zh) && !hasHan(en) {
		return b.V.Zh(strings.TrimSpace(zh), strings.TrimSpace(en))
	}
	return s
}

func hasHan(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Han, r) {
			return true
		}
	}
	return false
}
func (b base) CanOperate() bool           { return b.V.Can(module.RoleOperator) }
func (b base) States() []keelrecon.State  { return keelrecon.States }
func (b base) Classes() []keelrecon.Class { return keelrecon.Classes }
func (b base) Me(actor string) bool       { return actor == b.V.Actor }

// Actor shows the system's own actor in words.
func (b base) Actor(a string) string {
	if a == keelrecon.SystemActor {
		return b.V.Zh("系统·对账", "system: reconciliation")
	}
	return web.ActorWord(b.V.Lang, a)
}

// StateClass colours a state's badge with the console's classes.
func (b base) StateClass(s keelrecon.State) string {
	switch s {
	case keelrecon.StateOpen:
		return "st-failed"
	case keelrecon.StateAwaitingApproval, keelrecon.StateApproved:
		return "st-waiting"
	case keelrecon.StateExecuted, keelrecon.StateAutoHealed:
		return "st-running"
	case keelrecon.StateVerified, keelrecon.StateResolved:
		return "st-completed"
	}
	return "st-cancelled"
}

// AmountTotals lists a class total's amounts by currency, in words.
func (b base) AmountTotals(ct keelrecon.ClassTotal) string {
	if len(ct.Amounts) == 0 {
		return "—"
	}
	out := ""
	for _, cur := range sortedKeys(ct.Amounts) {
		if out != "" {
			out += "；"
		}
		out += Money(ct.Amounts[cur], cur)
	}
	return out
}

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if keys[j] < keys[i] {
				keys[i], keys[j] = keys[j], keys[i]
			}
		}
	}
	return keys
}

func nextLink(path string, q url.Values, before int64) string {
	nq := url.Values{}
	for k, vs := range q {
		if k != "flash" && k != "err" {
			nq[k] = vs
		}
	}
	nq.Set("before", strconv.FormatInt(before, 10))
	return path + "?" + nq.Encode()
}

func (w *Web[TTx]) pageRuns(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	q := r.URL.Query()
	before, _ := strconv.ParseInt(q.Get("before"), 10, 64)
	runs, err := w.recon.ListRuns(r.Context(), keelrecon.RunFilter{Reconciler: q.Get("reconciler"), Before: max(before, 0), Limit: pageSize + 1})
	if err != nil {
		return nil, err
	}
	next := ""
	if len(runs) > pageSize {
		runs = runs[:pageSize]
		next = nextLink("/recon/runs", q, runs[pageSize-1].ID)
	}
	data := struct {
		base
		Reconcilers []keelrecon.Info
		Runs        []*keelrecon.Run
		Reconciler  string
		Next        string
	}{w.base(r, v), w.recon.Reconcilers(), runs, q.Get("reconciler"), next}
	return w.render("runs", v.Zh("对账任务", "Reconciliation runs"), "/recon/runs", data)
}

func (w *Web[TTx]) pageRun(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	run, err := w.recon.GetRun(r.Context(), id)
	if err != nil {
		return nil, err
	}
	data := struct {
		base
		Run *keelrecon.Run
	}{w.base(r, v), run}
	return w.render("run", v.Zh("对账任务", "Reconciliation run")+" #"+strconv.FormatInt(id, 10), "/recon/runs", data)
}

func (w *Web[TTx]) pageRunNow(rw http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	r = withActor(r, v)
	run, err := w.recon.Run(r.Context(), r.PostFormValue("reconciler"), time.Time{})
	if err != nil {
		return done(rw, r, v, "/recon/runs", err)
	}
	return done(rw, r, v, "/recon/runs/"+strconv.FormatInt(run.ID, 10), nil)
}

func (w *Web[TTx]) pageDiscrepancies(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	q := r.URL.Query()
	f := keelrecon.DiscrepancyFilter{Reconciler: q.Get("reconciler"), State: keelrecon.State(q.Get("state")),
		Class: keelrecon.Class(q.Get("class")), Key: q.Get("key"), Limit: pageSize + 1}
	if !f.State.Valid() {
		f.State = ""
	}
	if !f.Class.Valid() {
		f.Class = ""
	}
	f.Before, _ = strconv.ParseInt(q.Get("before"), 10, 64)
	f.Before = max(f.Before, 0)
	list, err := w.recon.ListDiscrepancies(r.Context(), f)
	if err != nil {
		return nil, err
	}
	next := ""
	if len(list) > pageSize {
		list = list[:pageSize]
		next = nextLink("/recon/discrepancies", q, list[pageSize-1].ID)
	}
	counts, err := w.recon.StateCounts(r.Context())
	if err != nil {
		return nil, err
	}
	data := struct {
		base
		Filter        keelrecon.DiscrepancyFilter
		Reconcilers   []keelrecon.Info
		Discrepancies []*keelrecon.DiscrepancyRow
		Counts        map[keelrecon.State]int64
		Next          string
	}{w.base(r, v), f, w.recon.Reconcilers(), list, counts, next}
	return w.render("discrepancies", v.Zh("对账差异", "Discrepancies"), "/recon/discrepancies", data)
}

func (w *Web[TTx]) pageDiscrepancy(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	d, err := w.recon.GetDiscrepancy(r.Context(), id)
	if err != nil {
		return nil, err
	}
	var ap *keelrecon.Approval
	if d.ApprovalID != nil {
		if ap, err = w.recon.Approvals().Get(r.Context(), *d.ApprovalID); err != nil {
			return nil, err
		}
	}
	data := struct {
		base
		D        *keelrecon.DiscrepancyRow
		Evidence EvidenceTable
		Approval *keelrecon.Approval
		// What the operator may do now.
		CanRequest, CanDecide, CanExecute, SelfRequested bool
	}{base: w.base(r, v), D: d, Evidence: Evidence(d.Evidence).In(v.Lang, Scope(d.Reconciler), w.zone), Approval: ap}
	op := data.CanOperate()
	data.CanRequest = op && d.State == keelrecon.StateOpen
	data.SelfRequested = ap != nil && ap.RequestedBy == v.Actor
	data.CanDecide = op && d.State == keelrecon.StateAwaitingApproval && !data.SelfRequested
	data.CanExecute = op && (d.State == keelrecon.StateApproved || (d.State == keelrecon.StateOpen && !d.NeedsApproval))
	return w.render("discrepancy", v.Zh("对账差异", "Discrepancy")+" #"+strconv.FormatInt(id, 10), "/recon/discrepancies", data)
}

func (w *Web[TTx]) pageDiscrepancyAction(rw http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	action := r.PathValue("action")
	if !isAction(action) {
		return nil, module.Errorf(http.StatusNotFound, "not_found", "no such action")
	}
	r = withActor(r, v)
	_, err = w.discrepancyAction(r, action, id, r.PostFormValue("reason"))
	return done(rw, r, v, "/recon/discrepancies/"+strconv.FormatInt(id, 10), err)
}

func (w *Web[TTx]) pageApprovals(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	ctx := r.Context()
	awaiting, err := w.recon.Approvals().Awaiting(ctx, v.Actor, pageSize)
	if err != nil {
		return nil, err
	}
	recent, err := w.recon.Approvals().List(ctx, keelrecon.ApprovalFilter{Limit: pageSize})
	if err != nil {
		return nil, err
	}
	data := struct {
		base
		Awaiting []*keelrecon.Approval
		Recent   []*keelrecon.Approval
		Kinds    map[string]string
		// Executable kinds are executed from this page (their module
		// registered an Execute).
		Executable map[string]bool
	}{w.base(r, v), awaiting, recent, map[string]string{}, map[string]bool{}}
	for _, list := range [][]*keelrecon.Approval{awaiting, recent} {
		for _, a := range list {
			if k, ok := w.recon.Approvals().KindOf(a.Kind); ok {
				data.Kinds[a.Kind] = v.Zh(k.ZH, k.EN)
				data.Executable[a.Kind] = k.Execute != nil
			} else {
				data.Kinds[a.Kind] = a.Kind
			}
		}
	}
	return w.render("approvals", v.Zh("待我审批", "My approvals"), "/approvals", data)
}

func (w *Web[TTx]) pageApprovalAction(rw http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	action := r.PathValue("action")
	if action != "approve" && action != "reject" && action != "execute" {
		return nil, module.Errorf(http.StatusNotFound, "not_found", "no such action")
	}
	r = withActor(r, v)
	_, err = w.approvalAction(r, action, id, r.PostFormValue("reason"))
	return done(rw, r, v, "/approvals", err)
}
