package delivery

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
)

// scopeFixture is two enterprises, three applications and records of
// every kind and status over two Beijing days, for the filter tests.
type scopeFixture[TTx any] struct {
	e          *env[TTx]
	i          *inst[TTx]
	e1, e2     int64
	a1, a2, a3 *Application
	recs       []*Record
}

func newScopeFixture[TTx any](t *testing.T, e *env[TTx]) *scopeFixture[TTx] {
	i := e.insertOnly()
	f := &scopeFixture[TTx]{e: e, i: i}
	f.e1 = e.enterprise(i, "华东物流")
	f.e2 = e.enterprise(i, "北方零售")
	f.a1 = e.app(i, f.e1, "物流通知", "910001", ProtoCMPP30, "")
	f.a2 = e.app(i, f.e1, "物流回调", "wl-http", ProtoHTTP, "http://127.0.0.1:1/")
	f.a3 = e.app(i, f.e2, "零售营销", "920001", ProtoCMPP20, "")
	days := []time.Time{
		time.Date(2026, 8, 12, 0, 5, 0, 0, Beijing),   // first minutes of the 12th
		time.Date(2026, 8, 12, 23, 55, 0, 0, Beijing), // last minutes of the 12th (15:55 UTC)
		time.Date(2026, 8, 13, 0, 5, 0, 0, Beijing),   // the 13th in Beijing, still the 12th in UTC
	}
	apps := []*Application{f.a1, f.a2, f.a3}
	n := 0
	for _, st := range AllStatuses {
		for ai, a := range apps {
			for di, d := range days {
				n++
				at := d.Add(time.Duration(n) * time.Second)
				phone := "1380000" + pad4(n)
				if (ai+di)%2 == 0 {
					f.recs = append(f.recs, e.seed(i, a, st, at, phone))
				} else {
					f.recs = append(f.recs, e.seedMO(i, a, st, at, phone))
				}
			}
		}
	}
	// One record with a last error to search for.
	ctx := context.Background()
	victim := f.recs[0]
	if ok, err := i.m.st.failUnsent(ctx, victim.ID, victim.Version, "customer endpoint quarantined", SkipAppDisabled); err != nil || !ok {
		t.Fatalf("fail unsent: %v", err)
	}
	f.reload(t)
	return f
}

func pad4(n int) string { return strings.Repeat("0", 4-len(itoa(int64(n)))) + itoa(int64(n)) }

func (f *scopeFixture[TTx]) reload(t *testing.T) {
	t.Helper()
	for k, r := range f.recs {
		f.recs[k] = f.e.record(f.i, r.ID)
	}
}

// match is the filter's meaning, written independently of the SQL.
func (f *scopeFixture[TTx]) match(r *Record, fl Filter) bool {
	app := map[int64]*Application{f.a1.ID: f.a1, f.a2.ID: f.a2, f.a3.ID: f.a3}[r.AppID]
	entName := map[int64]string{f.e1: "华东物流", f.e2: "北方零售"}[r.EnterpriseID]
	day := r.CreatedAt.In(Beijing).Format(dateLayout)
	kw := strings.ToLower(fl.Keyword)
	switch {
	case fl.EnterpriseID != 0 && r.EnterpriseID != fl.EnterpriseID,
		fl.AppID != 0 && r.AppID != fl.AppID,
		fl.Kind != "" && r.Kind != fl.Kind,
		fl.Status != "" && r.Status != fl.Status,
		fl.DateFrom != "" && day < fl.DateFrom,
		fl.DateTo != "" && day > fl.DateTo:
		return false
	}
	if kw == "" {
		return true
	}
	for _, s := range []string{r.MsgID, app.Account, r.Phone, r.LastError, entName, app.Name} {
		if strings.Contains(strings.ToLower(s), kw) {
			return true
		}
	}
	return false
}

func (f *scopeFixture[TTx]) expect(fl Filter) (hits []int64, eligible []int64) {
	for _, r := range f.recs {
		if f.match(r, fl) {
			hits = append(hits, r.ID)
			if r.Status.Requeueable() {
				eligible = append(eligible, r.ID)
			}
		}
	}
	return hits, eligible
}

func itemRecordIDs[TTx any](t *testing.T, i *inst[TTx], id int64) []int64 {
	t.Helper()
	var out []int64
	for _, it := range allItems(t, i, id) {
		rid, err := recordOfSubject(it.Subject)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rid)
	}
	slices.Sort(out)
	return out
}

// TestDRQ001 (筛选快照): enterprise, application, kind, status, Beijing
// creation days and keyword each narrow the scope exactly as their
// meaning says; page and size are not part of a filter (the API refuses
// them in a preview body, the query form ignores them, and the task is
// the same from any page); a record created after the preview's snapshot
// never enters the task, whatever it matches.
func TestDRQ001(t *testing.T) {
	t.Parallel()
	eachDB(t, testDRQ001[pgx.Tx], testDRQ001[*sql.Tx])
}

func testDRQ001[TTx any](t *testing.T, e *env[TTx]) {
	f := newScopeFixture(t, e)
	i := f.i
	cases := map[string]Filter{
		"enterprise":     {EnterpriseID: f.e1},
		"application":    {EnterpriseID: f.e1, AppID: f.a2.ID},
		"kind":           {Kind: KindMO},
		"status":         {Status: StatusUnconfirmed},
		"day (Beijing)":  {DateFrom: "2026-08-13", DateTo: "2026-08-13"},
		"until the 12th": {DateTo: "2026-08-12"},
		"kw msg id":      {Keyword: f.recs[7].MsgID[3:12]},
		"kw account":     {Keyword: "920001"},
		"kw phone":       {Keyword: f.recs[11].Phone},
		"kw last error":  {Keyword: "QUARANTINED"},
		"kw enterprise":  {Keyword: "北方"},
		"kw application": {Keyword: "回调"},
		"combined":       {EnterpriseID: f.e1, Kind: KindReport, DateFrom: "2026-08-12", DateTo: "2026-08-12", Keyword: "物流"},
	}
	for name, fl := range cases {
		hits, eligible := f.expect(fl)
		if len(hits) == 0 {
			t.Fatalf("%s: the fixture has no record for the filter", name)
		}
		pv, err := i.m.PreviewTask(alice(), fl)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if pv.Hits != int64(len(hits)) || pv.Eligible != int64(len(eligible)) {
			t.Errorf("%s: preview %d hits / %d eligible, want %d / %d", name, pv.Hits, pv.Eligible, len(hits), len(eligible))
			continue
		}
		b, err := i.m.CreateTask(alice(), CreateTaskRequest{Token: pv.Token, Reason: "scope check " + name})
		if err != nil {
			t.Fatalf("%s: create: %v", name, err)
		}
		if got := itemRecordIDs(t, i, b.ID); !slices.Equal(got, sorted(eligible)) {
			t.Errorf("%s: task items %v, want %v", name, got, sorted(eligible))
		}
	}
	if _, err := i.m.PreviewTask(alice(), Filter{DateFrom: "2026-13-01"}); err == nil {
		t.Fatal("a bad date was accepted")
	}

	// Paging is not part of the filter.
	q := url.Values{"enterprise_id": {itoa(f.e1)}, "status": {"failed"}, "page": {"3"}, "size": {"50"}}
	fromPage, err := FilterFromQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	q.Del("page")
	q.Del("size")
	fromFirst, _ := FilterFromQuery(q)
	if fromPage != fromFirst {
		t.Fatalf("page and size changed the filter: %+v vs %+v", fromPage, fromFirst)
	}
	status, _, err := callRoute(t, i.m.apiPreview, "POST", PathTasks+"/preview", `{"status":"failed","page":2,"size":25}`)
	var pe *module.Error
	if !errors.As(err, &pe) || pe.Code != "unknown_field" || status != 0 {
		t.Fatalf("a preview naming a page: %d %v", status, err)
	}
	a := createTask(t, i, fromPage, CreateTaskRequest{})
	b := createTask(t, i, fromFirst, CreateTaskRequest{})
	if x, y := itemRecordIDs(t, i, a.ID), itemRecordIDs(t, i, b.ID); !slices.Equal(x, y) || len(x) == 0 {
		t.Fatalf("tasks from page 3 and page 1 differ: %v vs %v", x, y)
	}

	// The snapshot: records created after it stay out.
	fl := Filter{AppID: f.a1.ID, Status: StatusPending}
	pv, err := i.m.PreviewTask(alice(), fl)
	if err != nil {
		t.Fatal(err)
	}
	late := f.e.seed(i, f.a1, StatusPending, time.Now(), "13999999999")
	lateMO := f.e.seedMO(i, f.a1, StatusPending, time.Now(), "13999999998")
	task, err := i.m.CreateTask(alice(), CreateTaskRequest{Token: pv.Token, Reason: "snapshot check"})
	if err != nil {
		t.Fatal(err)
	}
	got := itemRecordIDs(t, i, task.ID)
	if slices.Contains(got, late.ID) || slices.Contains(got, lateMO.ID) || int64(len(got)) != pv.Eligible {
		t.Fatalf("items %v include records created after the snapshot (%d, %d) or differ from the preview's %d",
			got, late.ID, lateMO.ID, pv.Eligible)
	}
	if !task.SnapshotAt.Equal(pv.SnapshotAt) {
		t.Fatalf("task snapshot %v, preview %v", task.SnapshotAt, pv.SnapshotAt)
	}
}

func sorted(v []int64) []int64 {
	out := slices.Clone(v)
	slices.Sort(out)
	return out
}

// callRoute runs h as alice (an operator) on a request routed by its
// ServeMux pattern, so that path values are set as in the server.
func callRoute(t *testing.T, h func(http.ResponseWriter, *http.Request) (int, any, error), method, target, body string) (int, any, error) {
	t.Helper()
	var r *http.Request
	if body != "" {
		r = httptest.NewRequest(method, target, bytes.NewBufferString(body))
		r.Header.Set("Content-Type", "application/json")
	} else {
		r = httptest.NewRequest(method, target, nil)
	}
	r = r.WithContext(alice())
	var status int
	var out any
	var err error
	mux := http.NewServeMux()
	pattern := method + " " + routePattern(r.URL.Path)
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { status, out, err = h(w, r) })
	mux.ServeHTTP(httptest.NewRecorder(), r)
	return status, out, err
}

// routePattern maps a concrete module path to its route pattern.
func routePattern(path string) string {
	parts := strings.Split(path, "/")
	for k, p := range parts {
		if _, err := strconv.ParseInt(p, 10, 64); err == nil && p != "" {
			parts[k] = "{id}"
		}
	}
	return strings.Join(parts, "/")
}

// TestDRQ002 (预检口径): hits, eligible, rule-skipped, the status
// distribution, the applications and the earliest record follow the
// filter exactly — a status filter is never widened to all statuses; a
// filter on awaiting_ack is counted but refused (no token).
func TestDRQ002(t *testing.T) {
	t.Parallel()
	eachDB(t, testDRQ002[pgx.Tx], testDRQ002[*sql.Tx])
}

func testDRQ002[TTx any](t *testing.T, e *env[TTx]) {
	f := newScopeFixture(t, e)
	i := f.i
	check := func(name string, fl Filter) *TaskPreview {
		t.Helper()
		pv, err := i.m.PreviewTask(alice(), fl)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		hits, eligible := f.expect(fl)
		byStatus := map[string]int64{}
		apps := map[int64]bool{}
		var earliest time.Time
		for _, r := range f.recs {
			if !f.match(r, fl) {
				continue
			}
			byStatus[string(r.Status)]++
			if r.Status.Requeueable() {
				apps[r.AppID] = true
			}
			if earliest.IsZero() || r.CreatedAt.Before(earliest) {
				earliest = r.CreatedAt
			}
		}
		if pv.Hits != int64(len(hits)) || pv.Eligible != int64(len(eligible)) || pv.RuleSkipped != pv.Hits-pv.Eligible ||
			pv.Apps != int64(len(apps)) || !mapsEqual(pv.ByStatus, byStatus) || pv.Earliest == nil || !pv.Earliest.Equal(earliest) {
			t.Fatalf("%s: preview %+v; want hits %d eligible %d apps %d by status %v earliest %v",
				name, pv, len(hits), len(eligible), len(apps), byStatus, earliest)
		}
		return pv
	}
	pending := check("pending", Filter{Status: StatusPending})
	if len(pending.ByStatus) != 1 || pending.ByStatus["pending"] != pending.Hits || pending.RuleSkipped != 0 || pending.Token == "" {
		t.Fatalf("a pending filter widened: %+v", pending)
	}
	all := check("all", Filter{})
	if all.RuleSkipped != all.ByStatus["awaiting_ack"] || all.RuleSkipped == 0 || all.Delivered != all.ByStatus["delivered"] {
		t.Fatalf("all statuses: %+v", all)
	}
	check("enterprise and kind", Filter{EnterpriseID: f.e2, Kind: KindReport})
	check("status and day", Filter{Status: StatusRejected, DateFrom: "2026-08-13"})
	aw := check("awaiting_ack", Filter{Status: StatusAwaitingACK})
	if aw.Refused != "awaiting_ack" || aw.Token != "" || aw.Eligible != 0 || aw.Hits == 0 {
		t.Fatalf("awaiting_ack preview: %+v", aw)
	}
	status, body, err := callRoute(t, i.m.apiPreview, "POST", PathTasks+"/preview", `{"status":"awaiting_ack"}`)
	if err != nil || status != http.StatusUnprocessableEntity || !strings.Contains(toJSON(body), "awaiting_ack_refused") {
		t.Fatalf("API preview of awaiting_ack: %d %v %s", status, err, toJSON(body))
	}
	if !slices.Equal(pending.AllowedStatuses, RequeueStatuses) {
		t.Fatalf("allowed statuses shown: %v", pending.AllowedStatuses)
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestDRQ003 (状态白名单): a task materializes exactly the pending,
// failed, unconfirmed, rejected and delivered records (never
// awaiting_ack), freezing each one's status; creation without a valid
// preview is refused. At execution a delivered record is re-sent only if
// the item froze it delivered: a record confirmed after the task was
// created is skipped (the gateway is not called), and so is one another
// task re-delivered after the snapshot.
func TestDRQ003(t *testing.T) {
	t.Parallel()
	eachDB(t, testDRQ003[pgx.Tx], testDRQ003[*sql.Tx])
}

func testDRQ003[TTx any](t *testing.T, e *env[TTx]) {
	hc := newHTTPCustomer(t, "secret-h3", ackAll)
	io := e.insertOnly()
	ent := e.enterprise(io, "Acme")
	a := e.app(io, ent, "acme-http", "h3", ProtoHTTP, hc.srv.URL)
	base := time.Now().Add(-time.Hour)
	byStatus := map[Status]*Record{}
	for k, st := range AllStatuses {
		byStatus[st] = e.seed(io, a, st, base.Add(time.Duration(k)*time.Second), "1390000000"+itoa(int64(k)))
	}
	extraDelivered := e.seed(io, a, StatusDelivered, base.Add(time.Minute), "13900000099")
	task := createTask(t, io, Filter{AppID: a.ID}, CreateTaskRequest{Rate: 50})
	items := allItems(t, io, task.ID)
	frozen := map[int64]Status{}
	for _, it := range items {
		var args RequeueArgs
		_ = json.Unmarshal(it.Args, &args)
		frozen[args.DeliveryID] = args.FrozenStatus
	}
	if len(items) != 6 || frozen[byStatus[StatusAwaitingACK].ID] != "" {
		t.Fatalf("materialized %d items %v; awaiting_ack must be left out", len(items), frozen)
	}
	for _, st := range RequeueStatuses {
		if frozen[byStatus[st].ID] != st {
			t.Fatalf("record in %s froze as %q", st, frozen[byStatus[st].ID])
		}
	}
	for name, tok := range map[string]string{"empty": "", "garbage": "abc.def"} {
		_, err := io.m.CreateTask(alice(), CreateTaskRequest{Token: tok, Reason: "no preview at all"})
		var pe *module.Error
		if !errors.As(err, &pe) || pe.Status != http.StatusBadRequest {
			t.Fatalf("%s token: %v", name, err)
		}
	}

	// Before execution: the failed record is confirmed by another push;
	// the extra delivered record is re-delivered by another task.
	confirm(t, e, io, byStatus[StatusFailed].ID, "j900001", 0)
	confirm(t, e, io, extraDelivered.ID, "j900002", 4242)

	w := e.start(testSettings("cmpp_addr", "off"))
	done := waitTask(t, w, task.ID, 20*time.Second, keeltype.BatchCompleted, keeltype.BatchPartialCompleted)
	outcome := map[int64]*ItemView{}
	list, err := w.m.TaskItems(context.Background(), "zh", task.ID, ItemQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for k := range list.Items {
		outcome[list.Items[k].DeliveryID] = &list.Items[k]
	}
	want := map[int64][2]string{
		byStatus[StatusPending].ID:     {"success", ""},
		byStatus[StatusUnconfirmed].ID: {"success", ""},
		byStatus[StatusRejected].ID:    {"success", ""},
		byStatus[StatusDelivered].ID:   {"success", ""},
		byStatus[StatusFailed].ID:      {"skipped", SkipConfirmedLater},
		extraDelivered.ID:              {"skipped", SkipOtherTask},
	}
	for id, w := range want {
		it := outcome[id]
		if it == nil || string(it.Outcome) != w[0] || it.Reason != w[1] {
			t.Fatalf("record %d: %+v, want %v", id, it, w)
		}
	}
	if done.State != keeltype.BatchCompleted || done.Counts[keeltype.OutcomeSuccess] != 4 || done.Counts[keeltype.OutcomeSkipped] != 2 {
		t.Fatalf("task: %s %v", done.State, done.Counts)
	}
	if outcome[byStatus[StatusFailed].ID].ReasonLabel != "创建任务后才被客户确认（由其他投递链路完成）" ||
		outcome[extraDelivered.ID].ReasonLabel != "已被其他任务处理（其他任务已成功投递）" {
		t.Fatalf("skip reasons in words: %q / %q", outcome[byStatus[StatusFailed].ID].ReasonLabel, outcome[extraDelivered.ID].ReasonLabel)
	}
	sent := map[string]int{}
	for _, it := range hc.received() {
		sent[it.ID]++
	}
	for id, w := range want {
		if n := sent[itoa(id)]; (w[0] == "success") != (n == 1) || n > 1 {
			t.Fatalf("record %d reached the customer %d times (item %s)", id, n, w[0])
		}
	}
}

// confirm concludes a record as delivered by another attempt (a push
// job, or a task when batchID is set), as if its ACK had come.
func confirm[TTx any](t *testing.T, e *env[TTx], i *inst[TTx], id int64, token string, batchID int64) {
	t.Helper()
	ctx := context.Background()
	r := e.record(i, id)
	_, err := i.m.st.claimRecord(ctx, &claim{ID: id, From: []Status{r.Status}, Version: r.Version, Sender: "other",
		Token: token, BatchID: batchID, ConnID: "c-other", Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if done, err := i.m.st.finishMany(ctx, []outcome{{ID: id, Token: token, Status: StatusDelivered, Result: &zero, Acked: true}}); err != nil || !done[id] {
		t.Fatalf("confirm %d: %v", id, err)
	}
}

var _ = keel.WithActor
