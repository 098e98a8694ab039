package eventsweb

import (
	"github.com/keelwork/keel/module/web"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/module"
)

// reasonBody is the body of every operator action.
type reasonBody struct {
	Reason string `json:"reason"`
}

// runBody asks for a run now.
type runBody struct {
	Reconciler string `json:"reconciler"`
	// Cutoff is RFC 3339; empty means now.
	Cutoff string `json:"cutoff,omitempty"`
}

// List is a page of a list; NextBefore continues it.
type List[T any] struct {
	Data       []T   `json:"data"`
	NextBefore int64 `json:"next_before,omitempty"`
}

// listParams reads the query parameters a list accepts, refusing others.
func listParams(q url.Values, allowed ...string) (before int64, limit int, err error) {
	for k := range q {
		ok := k == "before" || k == "limit"
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			return 0, 0, module.Invalid("unknown query parameter %q", k)
		}
	}
	limit = 50
	if s := q.Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > keelrecon.MaxList {
			return 0, 0, module.Invalid("limit must be 1..%d, got %q", keelrecon.MaxList, s)
		}
	}
	if s := q.Get("before"); s != "" {
		if before, err = strconv.ParseInt(s, 10, 64); err != nil || before < 1 {
			return 0, 0, module.Invalid("before must be a positive id, got %q", s)
		}
	}
	return before, limit, nil
}

func page[T any](rows []T, limit int, id func(T) int64) List[T] {
	out := List[T]{Data: rows}
	if out.Data == nil {
		out.Data = []T{}
	}
	if len(rows) == limit && limit > 0 {
		out.NextBefore = id(rows[len(rows)-1])
	}
	return out
}

func (w *Web[TTx]) apiReconcilers(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	// The list is short and whole: it takes no parameters, and refuses any.
	if q := web.NewQuery(r); q.Err != nil {
		return 0, nil, q.Err
	}
	return http.StatusOK, map[string]any{"data": w.recon.Reconcilers()}, nil
}

func (w *Web[TTx]) apiRuns(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	q := r.URL.Query()
	before, limit, err := listParams(q, "reconciler")
	if err != nil {
		return 0, nil, err
	}
	runs, err := w.recon.ListRuns(r.Context(), keelrecon.RunFilter{Reconciler: q.Get("reconciler"), Before: before, Limit: limit})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, page(runs, limit, func(x *keelrecon.Run) int64 { return x.ID }), nil
}

func (w *Web[TTx]) apiRun(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := apiPathID(r)
	if err != nil {
		return 0, nil, err
	}
	run, err := w.recon.GetRun(r.Context(), id)
	return http.StatusOK, run, err
}

func (w *Web[TTx]) apiRunNow(rw http.ResponseWriter, r *http.Request) (int, any, error) {
	var b runBody
	if err := module.Decode(rw, r, &b); err != nil {
		return 0, nil, err
	}
	cutoff, err := parseCutoff(b.Cutoff)
	if err != nil {
		return 0, nil, err
	}
	if strings.TrimSpace(b.Reconciler) == "" {
		return 0, nil, module.Invalid("reconciler is required")
	}
	run, err := w.recon.Run(r.Context(), b.Reconciler, cutoff)
	if err != nil {
		return 0, nil, problem(err)
	}
	return http.StatusCreated, run, nil
}

func parseCutoff(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, module.Invalid("cutoff must be an RFC 3339 time, got %q", s)
	}
	return t, nil
}

func discrepancyFilter(q url.Values) (keelrecon.DiscrepancyFilter, error) {
	before, limit, err := listParams(q, "reconciler", "state", "class", "key")
	if err != nil {
		return keelrecon.DiscrepancyFilter{}, err
	}
	f := keelrecon.DiscrepancyFilter{Reconciler: q.Get("reconciler"), State: keelrecon.State(q.Get("state")),
		Class: keelrecon.Class(q.Get("class")), Key: q.Get("key"), Before: before, Limit: limit}
	if f.State != "" && !f.State.Valid() {
		return f, module.Invalid("unknown state %q", f.State)
	}
	if f.Class != "" && !f.Class.Valid() {
		return f, module.Invalid("unknown class %q", f.Class)
	}
	return f, nil
}

func (w *Web[TTx]) apiDiscrepancies(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	f, err := discrepancyFilter(r.URL.Query())
	if err != nil {
		return 0, nil, err
	}
	list, err := w.recon.ListDiscrepancies(r.Context(), f)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, page(list, f.Limit, func(x *keelrecon.DiscrepancyRow) int64 { return x.ID }), nil
}

func (w *Web[TTx]) apiDiscrepancy(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := apiPathID(r)
	if err != nil {
		return 0, nil, err
	}
	d, err := w.recon.GetDiscrepancy(r.Context(), id)
	return http.StatusOK, d, err
}

// discrepancyAction runs one operator action on a discrepancy.
func (w *Web[TTx]) discrepancyAction(r *http.Request, action string, id int64, reason string) (*keelrecon.DiscrepancyRow, error) {
	ctx := r.Context()
	var d *keelrecon.DiscrepancyRow
	var err error
	switch action {
	case "request":
		d, err = w.recon.RequestApproval(ctx, id, reason)
	case "approve":
		d, err = w.recon.Approve(ctx, id, reason)
	case "reject":
		d, err = w.recon.Reject(ctx, id, reason)
	case "execute":
		d, err = w.recon.Execute(ctx, id, reason)
	default:
		return nil, module.Errorf(http.StatusNotFound, "not_found", "no action %q (request, approve, reject or execute)", action)
	}
	return d, problem(err)
}

func (w *Web[TTx]) apiDiscrepancyAction(rw http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	action := r.PathValue("action")
	if !isAction(action) {
		return 0, nil, module.Errorf(http.StatusNotFound, "not_found", "no action %q (request, approve, reject or execute)", action)
	}
	var b reasonBody
	if err := module.Decode(rw, r, &b); err != nil {
		return 0, nil, err
	}
	d, err := w.discrepancyAction(r, action, id, b.Reason)
	return http.StatusOK, d, err
}

func isAction(a string) bool {
	return a == "request" || a == "approve" || a == "reject" || a == "execute"
}

func (w *Web[TTx]) apiApprovals(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	q := r.URL.Query()
	before, limit, err := listParams(q, "state", "kind", "awaiting")
	if err != nil {
		return 0, nil, err
	}
	f := keelrecon.ApprovalFilter{State: keelrecon.ApprovalState(q.Get("state")), Kind: q.Get("kind"), Before: before, Limit: limit}
	if f.State != "" && !f.State.Valid() {
		return 0, nil, module.Invalid("unknown state %q", f.State)
	}
	switch q.Get("awaiting") {
	case "":
	case "me":
		// What the caller may decide: pending, requested by someone else.
		f.State, f.NotRequestedBy = keelrecon.ApprovalPending, actorOf(r)
	default:
		return 0, nil, module.Invalid("awaiting must be \"me\", got %q", q.Get("awaiting"))
	}
	list, err := w.recon.Approvals().List(r.Context(), f)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, page(list, limit, func(x *keelrecon.Approval) int64 { return x.ID }), nil
}

func (w *Web[TTx]) apiApproval(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := apiPathID(r)
	if err != nil {
		return 0, nil, err
	}
	a, err := w.recon.Approvals().Get(r.Context(), id)
	return http.StatusOK, a, err
}

func (w *Web[TTx]) approvalAction(r *http.Request, action string, id int64, reason string) (*keelrecon.Approval, error) {
	ap := w.recon.Approvals()
	var a *keelrecon.Approval
	var err error
	switch action {
	case "approve":
		a, err = ap.Approve(r.Context(), id, reason)
	case "reject":
		a, err = ap.Reject(r.Context(), id, reason)
	case "execute":
		a, err = ap.Execute(r.Context(), id, reason)
	default:
		return nil, module.Errorf(http.StatusNotFound, "not_found", "no action %q (approve, reject or execute)", action)
	}
	return a, problem(err)
}

func (w *Web[TTx]) apiApprovalAction(rw http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	action := r.PathValue("action")
	if action != "approve" && action != "reject" && action != "execute" {
		return 0, nil, module.Errorf(http.StatusNotFound, "not_found", "no action %q (approve, reject or execute)", action)
	}
	var b reasonBody
	if err := module.Decode(rw, r, &b); err != nil {
		return 0, nil, err
	}
	a, err := w.approvalAction(r, action, id, b.Reason)
	return http.StatusOK, a, err
}
