package delivery

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
)

// PageSizes are the page sizes the record list offers.
var PageSizes = []int{10, 25, 50}

// RecordView is a delivery record as the list shows it.
type RecordView struct {
	ID             int64      `json:"id"`
	Kind           Kind       `json:"kind"`
	KindLabel      string     `json:"kind_label"`
	EnterpriseID   int64      `json:"enterprise_id"`
	EnterpriseName string     `json:"enterprise_name"`
	AppID          int64      `json:"app_id"`
	AppName        string     `json:"app_name"`
	Account        string     `json:"account"`
	MsgID          string     `json:"msg_id"`
	Phone          string     `json:"phone"`
	Status         Status     `json:"status"`
	StatusLabel    string     `json:"status_label"`
	Version        int64      `json:"version"`
	Attempts       int        `json:"attempts"`
	LastError      string     `json:"last_error,omitempty"`
	ErrorClass     string     `json:"error_class,omitempty"`
	ErrorLabel     string     `json:"error_class_label,omitempty"`
	Sender         string     `json:"sender,omitempty"`
	SubmitID       *int64     `json:"submit_id,omitempty"`
	SentAt         *time.Time `json:"sent_at,omitempty"`
	AckedAt        *time.Time `json:"acked_at,omitempty"`
	AckDeadline    *time.Time `json:"ack_deadline,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

func viewRecord(lang string, r *Record) RecordView {
	v := RecordView{ID: r.ID, Kind: r.Kind, KindLabel: Label(lang, "kind."+string(r.Kind)),
		EnterpriseID: r.EnterpriseID, EnterpriseName: r.EnterpriseName, AppID: r.AppID, AppName: r.AppName,
		Account: r.Account, MsgID: r.MsgID, Phone: r.Phone, Status: r.Status,
		StatusLabel: Label(lang, "status."+string(r.Status)), Version: r.Version, Attempts: r.Attempts,
		LastError: r.LastError, ErrorClass: r.LastErrorClass, Sender: r.Sender, SubmitID: r.SubmitID,
		SentAt: r.SentAt, AckedAt: r.AckedAt, AckDeadline: r.AckDeadline, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if r.LastErrorClass != "" {
		v.ErrorLabel = Label(lang, classKey(r.LastErrorClass))
	}
	return v
}

func classKey(class string) string {
	if _, ok := labels["class."+class]; ok {
		return "class." + class
	}
	return "skip." + class
}

// RecordPage is one page of the record list.
type RecordPage struct {
	Filter Filter       `json:"filter"`
	Items  []RecordView `json:"items"`
	Total  int64        `json:"total"`
	Page   int          `json:"page"`
	Size   int          `json:"size"`
	Pages  int          `json:"pages"`
}

// Records lists one page (size 10, 25 or 50) of the filter, newest first.
func (m *Module[TTx]) Records(ctx context.Context, lang string, f Filter, page, size int) (*RecordPage, error) {
	if err := f.Validate(); err != nil {
		return nil, module.Invalid("%v", err)
	}
	if !validSize(size) {
		return nil, module.Invalid("size must be 10, 25 or 50")
	}
	if page < 1 {
		page = 1
	}
	total, err := m.st.countRecords(ctx, &f, nil)
	if err != nil {
		return nil, err
	}
	recs, err := m.st.listRecords(ctx, &f, size, (page-1)*size)
	if err != nil {
		return nil, err
	}
	out := &RecordPage{Filter: f, Items: make([]RecordView, len(recs)), Total: total, Page: page, Size: size,
		Pages: int((total + int64(size) - 1) / int64(size))}
	for i, r := range recs {
		out.Items[i] = viewRecord(lang, r)
	}
	return out, nil
}

func validSize(n int) bool {
	for _, s := range PageSizes {
		if s == n {
			return true
		}
	}
	return false
}

// TaskView is a requeue task: its information (filter snapshot, reason,
// creator, speed, threshold, times), its summary and its paused
// applications.
type TaskView struct {
	ID           int64               `json:"id"`
	Name         string              `json:"name,omitempty"`
	State        keeltype.BatchState `json:"state"`
	StateLabel   string              `json:"state_label"`
	Reason       string              `json:"reason"`
	CreatedBy    string              `json:"created_by"`
	CreatedAt    time.Time           `json:"created_at"`
	SnapshotAt   time.Time           `json:"snapshot_at"`
	Filter       Filter              `json:"filter"`
	Scope        string              `json:"scope"`
	Rate         float64             `json:"rate"`
	AutoPause    int                 `json:"auto_pause"`
	PauseWhole   bool                `json:"pause_whole_task"`
	Preview      json.RawMessage     `json:"preview"`
	Total        int64               `json:"total"`
	Counts       []OutcomeCount      `json:"counts"`
	StartedAt    *time.Time          `json:"started_at,omitempty"`
	PausedAt     *time.Time          `json:"paused_at,omitempty"`
	CompletedAt  *time.Time          `json:"completed_at,omitempty"`
	LastError    string              `json:"last_error,omitempty"`
	PauseReason  string              `json:"pause_reason,omitempty"`
	PauseLabel   string              `json:"pause_label,omitempty"`
	PauseContext json.RawMessage     `json:"pause_context,omitempty"`
	PausedApps   []PausedApp         `json:"paused_apps,omitempty"`
	// Held says the task runs but items of its auto-paused applications
	// wait for an operator's resume (the task is not paused as a whole, so
	// it does not end by itself); HeldLabel says so in words.
	Held      bool   `json:"held_by_paused_apps,omitempty"`
	HeldLabel string `json:"held_label,omitempty"`
}

// OutcomeCount is one bucket of the summary.
type OutcomeCount struct {
	Outcome keeltype.BatchOutcome `json:"outcome"`
	Label   string                `json:"label"`
	N       int64                 `json:"n"`
}

// PausedApp is an application of a task stopped by its auto-pause.
type PausedApp struct {
	AppID    int64  `json:"app_id"`
	AppName  string `json:"app_name"`
	Failures int    `json:"consecutive_failures"`
	// Class is the delivery failure class of the failure that paused it
	// (ack_timeout, ack_rejected, …); EngineClass is the engine's class of
	// that job error (permanent: a decided failure), which the
	// batch.autopause audit entry names failure_class.
	Class       string     `json:"delivery_class"`
	ClassLabel  string     `json:"delivery_class_label"`
	EngineClass string     `json:"engine_class"`
	LastError   string     `json:"last_error"`
	PausedAt    *time.Time `json:"paused_at"`
	PausedBy    string     `json:"paused_by"`
}

func (m *Module[TTx]) viewTask(lang string, b *keeltype.BatchRow) TaskView {
	v := TaskView{ID: b.ID, Name: b.Name, State: b.State, StateLabel: Label(lang, "task."+string(b.State)),
		Reason: b.Reason, CreatedBy: b.CreatedBy, CreatedAt: b.CreatedAt, SnapshotAt: b.SnapshotAt, Rate: shownTaskRate(b.Rate),
		AutoPause: b.AutoPauseFailures, PauseWhole: b.PauseOnKeyPause, Preview: b.Preview, Total: b.Total,
		StartedAt: b.StartedAt, PausedAt: b.PausedAt, CompletedAt: b.CompletedAt, LastError: b.LastError,
		PauseReason: b.PauseReason, PauseContext: b.PauseContext}
	_ = json.Unmarshal(b.Filter, &v.Filter)
	v.Scope = m.scope(lang, &v.Filter)
	if b.PauseReason != "" {
		v.PauseLabel = Label(lang, "pause."+b.PauseReason)
	}
	for _, o := range keeltype.AllBatchOutcomes {
		v.Counts = append(v.Counts, OutcomeCount{Outcome: o, Label: Label(lang, "outcome."+string(o)), N: b.Counts[o]})
	}
	return v
}

// scope names the enterprise / application range of a filter.
func (m *Module[TTx]) scope(lang string, f *Filter) string {
	all := map[bool]string{true: "全部", false: "all"}[lang != "en"]
	ent, app := all, all
	if f.AppID > 0 {
		if a, ok := m.apps.get(f.AppID); ok {
			app, ent = a.Name, a.EnterpriseName
		}
	}
	if f.EnterpriseID > 0 && ent == all {
		for _, a := range m.apps.all() {
			if a.EnterpriseID == f.EnterpriseID {
				ent = a.EnterpriseName
				break
			}
		}
	}
	return ent + " / " + app
}

// TaskList is one page of tasks, newest first.
type TaskList struct {
	Items []TaskView `json:"items"`
	// Next is the cursor of the following page (0: none).
	Next int64 `json:"next,omitempty"`
}

// Tasks pages requeue tasks newest first (before: cursor), optionally
// in one state.
func (m *Module[TTx]) Tasks(ctx context.Context, lang string, state keeltype.BatchState, before int64, limit int) (*TaskList, error) {
	if limit <= 0 || limit > 100 {
		limit = 20
	}
	p := &keel.BatchListParams{Kind: BatchKind, BeforeID: before, Limit: limit + 1}
	if state != "" {
		p.States = []keeltype.BatchState{state}
	}
	rows, err := m.client.Load().BatchList(ctx, p)
	if err != nil {
		return nil, err
	}
	out := &TaskList{}
	if len(rows) > limit {
		rows = rows[:limit]
		out.Next = rows[limit-1].ID
	}
	for _, b := range rows {
		out.Items = append(out.Items, m.viewTask(lang, b))
	}
	return out, nil
}

// Task returns one task with its paused applications.
func (m *Module[TTx]) Task(ctx context.Context, lang string, id int64) (*TaskView, error) {
	b, err := m.task(ctx, id)
	if err != nil {
		return nil, err
	}
	v := m.viewTask(lang, b)
	keys, err := m.client.Load().BatchKeys(ctx, id, "", 1000)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if k.PausedAt == nil {
			continue
		}
		appID, _ := appOfKey(k.Key)
		pa := PausedApp{AppID: appID, Failures: k.ConsecutiveFailures, Class: k.LastFailureClass, LastError: k.LastError,
			PausedAt: k.PausedAt, PausedBy: k.PausedBy}
		if a, ok := m.apps.get(appID); ok {
			pa.AppName = a.Name
		}
		pa.Class, pa.LastError = splitFailure(k.LastError, k.LastFailureClass)
		pa.ClassLabel, pa.EngineClass = Label(lang, classKey(pa.Class)), k.LastFailureClass
		v.PausedApps = append(v.PausedApps, pa)
	}
	if len(v.PausedApps) > 0 && (b.State == keeltype.BatchRunning || b.State == keeltype.BatchQueued) {
		v.Held, v.HeldLabel = true, Label(lang, "task.held")
	}
	return &v, nil
}

// splitFailure reads "failed: <class>: <detail>" back into its class.
func splitFailure(msg, engineClass string) (string, string) {
	// A lost connection's item is ended as cancelled ("cancelled: …"):
	// failed, but not counted toward the auto-pause.
	rest := strings.TrimPrefix(strings.TrimPrefix(msg, "failed: "), "cancelled: ")
	class, detail, ok := strings.Cut(rest, ": ")
	if ok {
		if _, known := labels["class."+class]; known {
			return class, detail
		}
	}
	return engineClass, msg
}

// ItemView is one task item with its record.
type ItemView struct {
	DeliveryID   int64                 `json:"delivery_id"`
	MsgID        string                `json:"msg_id"`
	Phone        string                `json:"phone"`
	AppID        int64                 `json:"app_id"`
	AppName      string                `json:"app_name"`
	Kind         Kind                  `json:"kind"`
	FrozenStatus Status                `json:"frozen_status"`
	FrozenLabel  string                `json:"frozen_status_label"`
	RecordStatus Status                `json:"record_status,omitempty"`
	Outcome      keeltype.BatchOutcome `json:"outcome"`
	OutcomeLabel string                `json:"outcome_label"`
	Reason       string                `json:"reason,omitempty"`
	ReasonLabel  string                `json:"reason_label,omitempty"`
	Error        string                `json:"error,omitempty"`
	Attempts     int                   `json:"attempts"`
	JobID        int64                 `json:"job_id"`
	FinishedAt   *time.Time            `json:"finished_at,omitempty"`
}

// ItemQuery filters and pages a task's items.
type ItemQuery struct {
	Outcome keeltype.BatchOutcome
	MsgID   string
	// Reason is a skip reason, failure class or wait reason code, its
	// label, or any text of the error.
	Reason string
	After  string
	Limit  int
}

// ItemList is one page of items; Next is the cursor of the next page.
type ItemList struct {
	Items []ItemView `json:"items"`
	Next  string     `json:"next,omitempty"`
}

// TaskItems pages every item of a task (not only its failures), filtered
// by outcome, reason or message id.
func (m *Module[TTx]) TaskItems(ctx context.Context, lang string, id int64, q ItemQuery) (*ItemList, error) {
	if _, err := m.task(ctx, id); err != nil {
		return nil, err
	}
	if q.Limit <= 0 || q.Limit > 200 {
		q.Limit = 50
	}
	if q.Outcome != "" && !knownOutcome(q.Outcome) {
		return nil, module.Invalid("outcome %q is unknown", q.Outcome)
	}
	p := keel.BatchItemsParams{BatchID: id, Outcome: q.Outcome, Text: reasonText(q.Reason), AfterSubject: q.After, Limit: q.Limit + 1}
	var rows []*keeltype.JobRow
	var err error
	if q.MsgID != "" {
		rows, err = m.itemsByMsgID(ctx, p, q.MsgID)
	} else {
		rows, err = m.client.Load().BatchItems(ctx, &p)
	}
	if err != nil {
		return nil, err
	}
	out := &ItemList{}
	if len(rows) > q.Limit {
		rows = rows[:q.Limit]
		out.Next = rows[q.Limit-1].Subject
	}
	out.Items, err = m.viewItems(ctx, lang, rows)
	return out, err
}

func knownOutcome(o keeltype.BatchOutcome) bool {
	for _, k := range keeltype.AllBatchOutcomes {
		if k == o {
			return true
		}
	}
	return false
}

// reasonText maps a reason label to its code, so that an operator can
// search by the words the console shows.
func reasonText(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	for key, l := range labels {
		if l.zh == s || strings.EqualFold(l.en, s) {
			_, code, _ := strings.Cut(key, ".")
			return code
		}
	}
	return s
}

func (m *Module[TTx]) itemsByMsgID(ctx context.Context, p keel.BatchItemsParams, msgID string) ([]*keeltype.JobRow, error) {
	ids, err := m.st.recordIDsByMsgID(ctx, strings.TrimSpace(msgID))
	if err != nil {
		return nil, err
	}
	var out []*keeltype.JobRow
	for _, id := range ids {
		p.Subject, p.AfterSubject = subjectOf(id), ""
		rows, err := m.client.Load().BatchItems(ctx, &p)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

func (m *Module[TTx]) viewItems(ctx context.Context, lang string, rows []*keeltype.JobRow) ([]ItemView, error) {
	ids := make([]int64, 0, len(rows))
	for _, r := range rows {
		if id, err := recordOfSubject(r.Subject); err == nil {
			ids = append(ids, id)
		}
	}
	recs, err := m.st.recordsByIDs(ctx, ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[int64]*Record, len(recs))
	for _, r := range recs {
		byID[r.ID] = r
	}
	out := make([]ItemView, 0, len(rows))
	for _, row := range rows {
		out = append(out, viewItem(lang, row, byID))
	}
	return out, nil
}

func viewItem(lang string, row *keeltype.JobRow, recs map[int64]*Record) ItemView {
	var args RequeueArgs
	_ = json.Unmarshal(row.Args, &args)
	o := keel.BatchOutcomeOf(row)
	v := ItemView{DeliveryID: args.DeliveryID, AppID: args.AppID, FrozenStatus: args.FrozenStatus,
		FrozenLabel: Label(lang, "status."+string(args.FrozenStatus)), Outcome: o,
		OutcomeLabel: Label(lang, "outcome."+string(o)), Attempts: row.Attempt, JobID: row.ID, FinishedAt: row.FinalizedAt}
	if r, ok := recs[args.DeliveryID]; ok {
		v.MsgID, v.Phone, v.AppName, v.Kind, v.RecordStatus = r.MsgID, r.Phone, r.AppName, r.Kind, r.Status
	}
	v.Reason, v.ReasonLabel, v.Error = itemReason(lang, row, o)
	return v
}

// itemReason explains an item: the skip reason, the wait, or the failure
// class with its raw error.
func itemReason(lang string, row *keeltype.JobRow, o keeltype.BatchOutcome) (code, label, raw string) {
	switch o {
	case keeltype.OutcomeSkipped:
		var res struct {
			Skip string `json:"skip_reason"`
		}
		_ = json.Unmarshal(row.Result, &res)
		return res.Skip, Label(lang, "skip."+res.Skip), ""
	case keeltype.OutcomeWaitingConnection, keeltype.OutcomeWaitingExternalACK, keeltype.OutcomeWaitingACK:
		return row.WaitReason, Label(lang, "wait."+row.WaitReason), ""
	case keeltype.OutcomeFailed:
		if n := len(row.Errors); n > 0 {
			e := row.Errors[n-1]
			class, detail := splitFailure(e.Message, string(e.Class))
			return class, Label(lang, classKey(class)), detail
		}
		return "", "", ""
	case keeltype.OutcomeUnprocessed:
		return "batch_terminated", Label(lang, "outcome.unprocessed"), ""
	}
	return "", "", ""
}
