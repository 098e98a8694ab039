package delivery

import (
	"context"
	"net/http"
	"strconv"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/web"
)

// API paths: the requeue tasks at the paths operators' tools already call,
// plus the record list and its single and page requeues.
const (
	PathTasks      = "/admin/operations/downstream-requeue-tasks"
	PathDeliveries = "/admin/operations/downstream-deliveries"
	PathApps       = "/admin/operations/delivery-applications"
	PathEnts       = "/admin/operations/delivery-enterprises"
)

// Routes implements module.Web.
func (m *Module[TTx]) Routes() []module.Route {
	v, op := module.RoleViewer, module.RoleOperator
	return []module.Route{
		{Pattern: "GET " + PathDeliveries, Role: v, Handle: m.apiRecords},
		{Pattern: "GET " + PathDeliveries + "/{id}", Role: v, Handle: m.apiRecord},
		{Pattern: "POST " + PathDeliveries + "/{id}/requeue", Role: op, Handle: m.apiRequeueOne},
		{Pattern: "POST " + PathDeliveries + "/requeue", Role: op, Handle: m.apiRequeuePage},
		{Pattern: "GET " + PathApps, Role: v, Handle: m.apiApps},
		{Pattern: "POST " + PathEnts, Role: module.RoleAdmin, Handle: m.apiCreateEnterprise},
		{Pattern: "POST " + PathApps, Role: module.RoleAdmin, Handle: m.apiCreateApp},
		{Pattern: "PATCH " + PathApps + "/{id}", Role: module.RoleAdmin, Handle: m.apiUpdateApp},
		{Pattern: "POST " + PathTasks + "/preview", Role: op, Handle: m.apiPreview},
		{Pattern: "POST " + PathTasks, Role: op, Handle: m.apiCreate},
		{Pattern: "GET " + PathTasks, Role: v, Handle: m.apiTasks},
		{Pattern: "GET " + PathTasks + "/{id}", Role: v, Handle: m.apiTask},
		{Pattern: "GET " + PathTasks + "/{id}/items", Role: v, Handle: m.apiItems},
		{Pattern: "POST " + PathTasks + "/{id}/pause", Role: op, Handle: m.apiControl(m.PauseTask)},
		{Pattern: "POST " + PathTasks + "/{id}/resume", Role: op, Handle: m.apiControl(m.ResumeTask)},
		{Pattern: "POST " + PathTasks + "/{id}/terminate", Role: op, Handle: m.apiControl(m.TerminateTask)},
	}
}

func langOf(r *http.Request) string {
	if r.URL.Query().Get("lang") == "en" {
		return "en"
	}
	return "zh"
}

func pathID(r *http.Request) (int64, error) { return web.PathID(r, "id") }

// sizeParam reads a page size by the one paging rule (see web.Query.Limit),
// under the name the requeue API's callers already send ("size", not the
// kit's "limit").
func sizeParam(q *web.Query, name string, def int) int {
	s := q.Get(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > web.MaxLimit {
		q.Fail(web.Invalid("%s must be an integer 1..%d, got %q", name, web.MaxLimit, s))
		return def
	}
	return n
}

func (m *Module[TTx]) apiRecords(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	f, err := FilterFromQuery(r.URL.Query())
	if err != nil {
		return 0, nil, module.Invalid("%v", err)
	}
	if err := checkFilterText(&f); err != nil {
		return 0, nil, err
	}
	q := web.NewQuery(r, recordParams...)
	size := 10
	if s := q.Get("size"); s != "" {
		size = sizeParam(q, "size", 10)
	}
	page := q.Page("page", size)
	if q.Err != nil {
		return 0, nil, q.Err
	}
	out, err := m.Records(r.Context(), langOf(r), f, page, size)
	return http.StatusOK, out, err
}

// RecordDetail is a record with its push history (the evidence of every
// attempt and ACK).
type RecordDetail struct {
	RecordView
	Payload any `json:"payload"`
	History any `json:"history"`
}

func (m *Module[TTx]) apiRecord(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	if q := web.NewQuery(r, "lang"); q.Err != nil {
		return 0, nil, q.Err
	}
	recs, err := m.st.recordsByIDs(r.Context(), []int64{id})
	if err != nil {
		return 0, nil, err
	}
	if len(recs) == 0 {
		return 0, nil, module.Errorf(http.StatusNotFound, "delivery_not_found", "no delivery record %d", id)
	}
	rec := recs[0]
	return http.StatusOK, RecordDetail{RecordView: viewRecord(langOf(r), rec), Payload: rec.Payload, History: rec.History}, nil
}

type requeueBody struct {
	Reason  string `json:"reason"`
	Version int64  `json:"version,omitempty"`
}

func (m *Module[TTx]) apiRequeueOne(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	var b requeueBody
	if err := module.Decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	if b.Reason, err = web.Reason(b.Reason, true); err != nil {
		return 0, nil, err
	}
	if b.Version < 0 {
		return 0, nil, web.Invalid("version must be a positive integer (or left out)")
	}
	res, err := m.Requeue(r.Context(), []int64{id}, []int64{b.Version}, b.Reason, "single")
	if err != nil {
		return 0, nil, err
	}
	if err := requeueProblem(langOf(r), res[0]); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, res[0], nil
}

// requeueProblem: nil when requeued, a 404 problem for no record, a 409
// requeue_refused problem (saying why) otherwise.
func requeueProblem(lang string, res RequeueResult) error {
	switch {
	case res.Requeued:
		return nil
	case res.Refused == "not_found":
		return module.Errorf(http.StatusNotFound, "delivery_not_found", "no delivery record %d", res.ID)
	case res.Refused == "awaiting_ack":
		return module.Errorf(http.StatusConflict, "requeue_refused", "%s", Label(lang, "refuse.awaiting"))
	}
	return module.Errorf(http.StatusConflict, "requeue_refused", "%s", Label(lang, "refuse."+res.Refused))
}

type requeuePageBody struct {
	IDs      []int64 `json:"ids"`
	Versions []int64 `json:"versions,omitempty"`
	Reason   string  `json:"reason"`
}

func (m *Module[TTx]) apiRequeuePage(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var b requeuePageBody
	if err := module.Decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	if len(b.Versions) > 0 && len(b.Versions) != len(b.IDs) {
		return 0, nil, module.Invalid("versions must match ids one for one")
	}
	for i, id := range b.IDs {
		if id < 1 || (len(b.Versions) > 0 && b.Versions[i] < 0) {
			return 0, nil, module.Invalid("ids must be positive integers, versions positive or 0")
		}
	}
	var err error
	if b.Reason, err = web.Reason(b.Reason, true); err != nil {
		return 0, nil, err
	}
	res, err := m.Requeue(r.Context(), b.IDs, b.Versions, b.Reason, "page")
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"results": res}, nil
}

// AppsView lists enterprises and their applications (the filter's
// enterprise → application linkage).
type AppsView struct {
	Enterprises []EnterpriseView `json:"enterprises"`
}

// EnterpriseView is an enterprise and its applications.
type EnterpriseView struct {
	ID   int64     `json:"id"`
	Name string    `json:"name"`
	Apps []AppView `json:"apps"`
}

// AppView is an application without its secret.
type AppView struct {
	ID            int64    `json:"id"`
	Name          string   `json:"name"`
	Account       string   `json:"account"`
	Status        string   `json:"status"`
	Protocol      Protocol `json:"protocol"`
	ReportEnabled bool     `json:"report_enabled"`
	MOEnabled     bool     `json:"mo_enabled"`
	Rate          float64  `json:"rate"`
	Online        bool     `json:"online"`
}

func (m *Module[TTx]) apiApps(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	if q := web.NewQuery(r, "lang"); q.Err != nil {
		return 0, nil, q.Err
	}
	out, err := m.AppsView(r.Context())
	return http.StatusOK, out, err
}

// AppsView lists enterprises with their applications and whether each is
// connected to some instance now.
func (m *Module[TTx]) AppsView(ctx context.Context) (*AppsView, error) {
	ents, err := m.st.enterprises(ctx)
	if err != nil {
		return nil, err
	}
	out := &AppsView{}
	idx := map[int64]int{}
	for _, e := range ents {
		idx[e.ID] = len(out.Enterprises)
		out.Enterprises = append(out.Enterprises, EnterpriseView{ID: e.ID, Name: e.Name, Apps: []AppView{}})
	}
	for _, a := range m.apps.all() {
		i, ok := idx[a.EnterpriseID]
		if !ok {
			continue
		}
		online := a.Protocol == ProtoHTTP || m.links.has(a.ID) || m.pres.heldElsewhere(a.ID)
		out.Enterprises[i].Apps = append(out.Enterprises[i].Apps, appView(a, online))
	}
	return out, nil
}

func (m *Module[TTx]) apiPreview(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var f Filter
	if err := module.Decode(w, r, &f); err != nil {
		return 0, nil, err
	}
	if err := checkFilterText(&f); err != nil {
		return 0, nil, err
	}
	pv, err := m.PreviewTask(r.Context(), f)
	if err != nil {
		return 0, nil, err
	}
	if pv.Refused != "" {
		return http.StatusUnprocessableEntity, map[string]any{"preview": pv, "code": "awaiting_ack_refused",
			"detail": Label(langOf(r), "refuse.awaiting")}, nil
	}
	return http.StatusOK, pv, nil
}

func (m *Module[TTx]) apiCreate(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var b CreateTaskRequest
	if err := module.Decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	if err := checkTaskRequest(&b); err != nil {
		return 0, nil, err
	}
	row, created, err := m.CreateTaskOnce(r.Context(), b)
	if err != nil {
		return 0, nil, err
	}
	if !created {
		// The token made its task already: the same task again, not a new one.
		return http.StatusOK, m.viewTask(langOf(r), row), nil
	}
	return http.StatusCreated, m.viewTask(langOf(r), row), nil
}

func (m *Module[TTx]) apiTasks(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	q := web.NewQuery(r, "state", "before", "limit", "lang")
	state := keeltype.BatchState(q.Get("state"))
	if state != "" && !validTaskState(state) {
		return 0, nil, module.Invalid("state %q is unknown", state)
	}
	// before=0 (or none) is the first page; a task id otherwise.
	var before int64
	if q.Get("before") != "0" {
		before = q.ID("before")
	}
	limit := q.Limit(20)
	if q.Err != nil {
		return 0, nil, q.Err
	}
	out, err := m.Tasks(r.Context(), langOf(r), state, before, limit)
	return http.StatusOK, out, err
}

// TaskStates lists the task states in display order.
var TaskStates = []keeltype.BatchState{keeltype.BatchQueued, keeltype.BatchRunning, keeltype.BatchPaused,
	keeltype.BatchCompleted, keeltype.BatchPartialCompleted, keeltype.BatchTerminated}

func validTaskState(s keeltype.BatchState) bool {
	for _, v := range TaskStates {
		if v == s {
			return true
		}
	}
	return false
}

func (m *Module[TTx]) apiTask(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	if q := web.NewQuery(r, "lang"); q.Err != nil {
		return 0, nil, q.Err
	}
	out, err := m.Task(r.Context(), langOf(r), id)
	return http.StatusOK, out, err
}

func (m *Module[TTx]) apiItems(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	q := web.NewQuery(r, "outcome", "msg_id", "reason", "after", "limit", "lang")
	limit := q.Limit(50)
	iq := ItemQuery{Outcome: keeltype.BatchOutcome(q.Get("outcome")), MsgID: q.Text("msg_id", 64),
		Reason: q.Text("reason", 200), After: q.Text("after", 200), Limit: limit}
	if q.Err != nil {
		return 0, nil, q.Err
	}
	out, err := m.TaskItems(r.Context(), langOf(r), id, iq)
	return http.StatusOK, out, err
}

type controlBody struct {
	Reason string `json:"reason"`
}

func (m *Module[TTx]) apiControl(f func(context.Context, int64, string) (*keeltype.BatchRow, error)) func(http.ResponseWriter, *http.Request) (int, any, error) {
	return func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		id, err := pathID(r)
		if err != nil {
			return 0, nil, err
		}
		var b controlBody
		if err := module.Decode(w, r, &b); err != nil {
			return 0, nil, err
		}
		reason, err := web.Reason(b.Reason, true)
		if err != nil {
			return 0, nil, err
		}
		row, err := f(r.Context(), id, reason)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, m.viewTask(langOf(r), row), nil
	}
}

func (m *Module[TTx]) apiCreateEnterprise(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var b struct {
		Name string `json:"name"`
	}
	if err := module.Decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	name, err := web.Name("name", b.Name, 200)
	if err != nil {
		return 0, nil, err
	}
	b.Name = name
	id, err := m.CreateEnterprise(r.Context(), b.Name)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, map[string]any{"id": id, "name": b.Name}, nil
}

// appBody creates an application through the API.
type appBody struct {
	EnterpriseID  int64    `json:"enterprise_id"`
	Name          string   `json:"name"`
	Account       string   `json:"account"`
	Secret        string   `json:"secret"`
	Protocol      Protocol `json:"protocol"`
	ReportEnabled bool     `json:"report_enabled"`
	MOEnabled     bool     `json:"mo_enabled"`
	ReportCompat  bool     `json:"report_compat"`
	PushURL       string   `json:"push_url"`
	MOCode        string   `json:"mo_code"`
	Rate          float64  `json:"rate"`
	Disabled      bool     `json:"disabled"`
}

func (m *Module[TTx]) apiCreateApp(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var b appBody
	if err := module.Decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	if err := b.check(); err != nil {
		return 0, nil, err
	}
	a, err := m.CreateApplication(r.Context(), NewApplication(b))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, appView(a, false), nil
}

func (m *Module[TTx]) apiUpdateApp(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	var b AppChange
	if err := module.Decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	if err := checkAppChange(&b); err != nil {
		return 0, nil, err
	}
	a, err := m.UpdateApplication(r.Context(), id, b)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, appView(a, false), nil
}

func appView(a *Application, online bool) AppView {
	return AppView{ID: a.ID, Name: a.Name, Account: a.Account, Status: a.Status, Protocol: a.Protocol,
		ReportEnabled: a.ReportEnabled, MOEnabled: a.MOEnabled, Rate: a.Rate, Online: online}
}
