package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module/web"
)

// Batch is a bulk task as the API shows it: its definition, counters per
// outcome, progress and, when paused, why.
type Batch struct {
	ID                int64                           `json:"id"`
	Kind              string                          `json:"kind"`
	Name              string                          `json:"name,omitempty"`
	Reason            string                          `json:"reason"`
	Filter            json.RawMessage                 `json:"filter,omitempty"`
	FilterHash        string                          `json:"filter_hash"`
	SnapshotAt        time.Time                       `json:"snapshot_at"`
	CreatedBy         string                          `json:"created_by"`
	Queue             string                          `json:"queue"`
	RatePerKey        float64                         `json:"rate_per_key"`
	AutoPauseFailures int                             `json:"autopause_failures"`
	PauseOnKeyPause   bool                            `json:"pause_on_key_pause"`
	Preview           json.RawMessage                 `json:"preview,omitempty"`
	State             keeltype.BatchState             `json:"state"`
	Materialized      bool                            `json:"materialized"`
	Pause             *BatchPause                     `json:"pause,omitempty"`
	LastError         string                          `json:"last_error,omitempty"`
	CreatedAt         time.Time                       `json:"created_at"`
	StartedAt         *time.Time                      `json:"started_at,omitempty"`
	PausedAt          *time.Time                      `json:"paused_at,omitempty"`
	CompletedAt       *time.Time                      `json:"completed_at,omitempty"`
	UpdatedAt         time.Time                       `json:"updated_at"`
	Counts            map[keeltype.BatchOutcome]int64 `json:"counts"`
	Progress          BatchProgress                   `json:"progress"`
	// PausedKeys are the batch's paused flow keys (module keys, e.g.
	// "app:42"); only on GET /batches/{id}.
	PausedKeys []*BatchKey `json:"paused_keys,omitempty"`
}

// BatchPause says why a batch is paused: "manual" (by an operator) or
// "auto" (a key's auto-pause), with the triggering key and failure class.
type BatchPause struct {
	Reason       string          `json:"reason"`
	By           string          `json:"by,omitempty"`
	Note         string          `json:"note,omitempty"`
	Key          string          `json:"key,omitempty"`
	FailureClass string          `json:"failure_class,omitempty"`
	Context      json.RawMessage `json:"context,omitempty"`
}

// BatchProgress is done/total, items per second since start and the ETA.
type BatchProgress struct {
	Done       int64   `json:"done"`
	Total      int64   `json:"total"`
	Percent    float64 `json:"percent"`
	Rate       float64 `json:"rate_per_second"`
	ETASeconds float64 `json:"eta_seconds,omitempty"`
}

// BatchKey is one flow key of a batch.
type BatchKey struct {
	Key                 string     `json:"key"`
	FlowKey             string     `json:"flow_key"`
	Paused              bool       `json:"paused"`
	PausedAt            *time.Time `json:"paused_at,omitempty"`
	PauseReason         string     `json:"pause_reason,omitempty"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	LastError           string     `json:"last_error,omitempty"`
	LastFailureClass    string     `json:"last_failure_class,omitempty"`
}

// BatchItem is one item of a batch: its job with the outcome bucket and the
// reason of a skip, failure or wait.
type BatchItem struct {
	Subject string                `json:"subject"`
	Outcome keeltype.BatchOutcome `json:"outcome"`
	Why     string                `json:"why,omitempty"`
	Job     *Job                  `json:"job"`
}

// BatchView converts a stored batch at now.
func BatchView(b *keeltype.BatchRow, now time.Time) *Batch {
	v := &Batch{ID: b.ID, Kind: b.Kind, Name: b.Name, Reason: b.Reason, Filter: rawOrNil(b.Filter), FilterHash: b.FilterHash,
		SnapshotAt: b.SnapshotAt, CreatedBy: b.CreatedBy, Queue: b.Queue, RatePerKey: b.Rate,
		AutoPauseFailures: b.AutoPauseFailures, PauseOnKeyPause: b.PauseOnKeyPause, Preview: rawOrNil(b.Preview),
		State: b.State, Materialized: b.Materialized, LastError: b.LastError, CreatedAt: b.CreatedAt,
		StartedAt: b.StartedAt, PausedAt: b.PausedAt, CompletedAt: b.CompletedAt, UpdatedAt: b.UpdatedAt,
		Counts: map[keeltype.BatchOutcome]int64{}}
	for _, o := range keeltype.AllBatchOutcomes {
		v.Counts[o] = b.Counts[o]
	}
	p := keel.ProgressOf(b, now)
	v.Progress = BatchProgress{Done: p.Done, Total: p.Total, Rate: p.Rate, ETASeconds: p.ETA.Seconds()}
	if p.Total > 0 {
		v.Progress.Percent = float64(p.Done) * 100 / float64(p.Total)
	}
	if b.State == keeltype.BatchPaused && b.PauseReason != "" {
		v.Pause = &BatchPause{Reason: b.PauseReason, Context: rawOrNil(b.PauseContext)}
		var c struct {
			By           string `json:"by"`
			Reason       string `json:"reason"`
			Key          string `json:"key"`
			FailureClass string `json:"failure_class"`
		}
		if json.Unmarshal(b.PauseContext, &c) == nil {
			v.Pause.By, v.Pause.Note, v.Pause.Key, v.Pause.FailureClass = c.By, c.Reason, c.Key, c.FailureClass
		}
	}
	return v
}

// BatchKeyView converts a batch's flow key row.
func BatchKeyView(batchID int64, k *keeltype.FlowKeyRow) *BatchKey {
	return &BatchKey{Key: strings.TrimPrefix(k.Key, keel.BatchKeyPrefix(batchID)), FlowKey: k.Key, Paused: k.PausedAt != nil,
		PausedAt: k.PausedAt, PauseReason: k.PauseReason, ConsecutiveFailures: k.ConsecutiveFailures,
		LastError: k.LastError, LastFailureClass: k.LastFailureClass}
}

// BatchItemView converts an item's job row.
func BatchItemView(row *keeltype.JobRow) *BatchItem {
	o := keel.BatchOutcomeOf(row)
	return &BatchItem{Subject: row.Subject, Outcome: o, Why: ItemWhy(o, row), Job: JobView(row)}
}

// ItemWhy is the reason of an item's outcome: the skip code, the last
// error of a failure, the wait reason; empty otherwise.
func ItemWhy(o keeltype.BatchOutcome, row *keeltype.JobRow) string {
	switch o {
	case keeltype.OutcomeSkipped, keeltype.OutcomeUnprocessed:
		var r struct {
			Skip   string `json:"skip_reason"` // keel.JobSkip
			Reason string `json:"reason"`
			Code   string `json:"code"`
		}
		if json.Unmarshal(row.Result, &r) == nil {
			if r.Skip != "" {
				return r.Skip
			}
			if r.Code != "" {
				return r.Code
			}
			if r.Reason != "" {
				return r.Reason
			}
		}
		var s string
		if json.Unmarshal(row.Result, &s) == nil {
			return s
		}
		return string(row.Result)
	case keeltype.OutcomeFailed:
		if n := len(row.Errors); n > 0 {
			e := row.Errors[n-1]
			if e.Class != "" {
				return string(e.Class) + ": " + e.Message
			}
			return e.Message
		}
		return string(row.Result)
	case keeltype.OutcomeWaitingConnection, keeltype.OutcomeWaitingExternalACK, keeltype.OutcomeWaitingACK, keeltype.OutcomeWaiting:
		return row.WaitReason
	}
	return ""
}

// ValidBatchState reports whether s names a batch state.
func ValidBatchState(s keeltype.BatchState) bool {
	switch s {
	case keeltype.BatchQueued, keeltype.BatchRunning, keeltype.BatchPaused, keeltype.BatchCompleted,
		keeltype.BatchPartialCompleted, keeltype.BatchTerminated:
		return true
	}
	return false
}

// ValidBatchOutcome reports whether o names an outcome bucket.
func ValidBatchOutcome(o keeltype.BatchOutcome) bool {
	for _, x := range keeltype.AllBatchOutcomes {
		if x == o {
			return true
		}
	}
	return false
}

// batchList: GET /batches?state=&kind=&cursor=&limit=, newest first.
func (h *Handler) batchList(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	q := newQuery(r, "state", "kind", "after", "cursor", "limit")
	p := &keel.BatchListParams{BeforeID: q.idCursor("b"), Limit: q.limit()}
	if kinds := q.names("kind"); len(kinds) > 1 {
		q.fail(CodeInvalidArgument, "kind takes one name")
	} else if len(kinds) == 1 {
		p.Kind = kinds[0]
	}
	for _, s := range q.names("state") {
		st := keeltype.BatchState(s)
		if !ValidBatchState(st) {
			q.fail(CodeInvalidArgument, "unknown batch state %q", s)
		}
		p.States = append(p.States, st)
	}
	if q.Err != nil {
		return 0, nil, q.Err
	}
	limit := p.Limit
	p.Limit++
	rows, err := h.engine.BatchList(r.Context(), p)
	if err != nil {
		return 0, nil, wrapf(err, "listing batches")
	}
	now := time.Now()
	page := &Page[*Batch]{Data: []*Batch{}}
	for i, row := range rows {
		if i == limit {
			page.NextCursor = encodeCursor("b", strconv.FormatInt(rows[i-1].ID, 10))
			break
		}
		page.Data = append(page.Data, BatchView(row, now))
	}
	return http.StatusOK, page, nil
}

// BatchDetail reads a batch with its paused keys (every one, paging
// through them).
func BatchDetail(ctx context.Context, e Engine, id int64) (*Batch, error) {
	row, err := e.BatchGet(ctx, id)
	if err != nil {
		return nil, err
	}
	v := BatchView(row, time.Now())
	after := ""
	for {
		keys, err := e.BatchKeys(ctx, id, after, 500)
		if err != nil {
			return nil, wrapf(err, "listing the keys of batch %d", id)
		}
		for _, k := range keys {
			if k.PausedAt != nil {
				v.PausedKeys = append(v.PausedKeys, BatchKeyView(id, k))
			}
		}
		if len(keys) < 500 {
			return v, nil
		}
		after = keys[len(keys)-1].Key
	}
}

func (h *Handler) batchGet(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r, chi.URLParam(r, "id"))
	if err != nil {
		return 0, nil, err
	}
	q := newQuery(r)
	if q.Err != nil {
		return 0, nil, q.Err
	}
	return ok(BatchDetail(r.Context(), h.engine, id))
}

// batchItems: GET /batches/{id}/items?outcome=&subject=&text=&cursor=&limit=,
// subject order.
func (h *Handler) batchItems(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r, chi.URLParam(r, "id"))
	if err != nil {
		return 0, nil, err
	}
	q := newQuery(r, "outcome", "subject", "text", "after", "cursor", "limit")
	after, _ := q.cursor("i")
	p := &keel.BatchItemsParams{BatchID: id, AfterSubject: after, Subject: q.text("subject", 512),
		Text: q.text("text", 200), Limit: q.limit() + 1}
	if o := q.r.URL.Query().Get("outcome"); o != "" {
		if !ValidBatchOutcome(keeltype.BatchOutcome(o)) {
			q.fail(CodeInvalidArgument, "unknown outcome %q", o)
		}
		p.Outcome = keeltype.BatchOutcome(o)
	}
	if q.Err != nil {
		return 0, nil, q.Err
	}
	if _, err := h.engine.BatchGet(r.Context(), id); err != nil {
		return 0, nil, err
	}
	rows, err := h.engine.BatchItems(r.Context(), p)
	if err != nil {
		return 0, nil, wrapf(err, "listing items of batch %d", id)
	}
	page := &Page[*BatchItem]{Data: []*BatchItem{}}
	for i, row := range rows {
		if i == p.Limit-1 {
			page.NextCursor = encodeCursor("i", rows[i-1].Subject)
			break
		}
		page.Data = append(page.Data, BatchItemView(row))
	}
	return http.StatusOK, page, nil
}

// readBatchReason reads the strict body {"reason": "..."}; batch control
// requires a reason of at least keel.MinBatchReasonRunes characters.
func readBatchReason(w http.ResponseWriter, r *http.Request) (string, error) {
	var b reasonBody
	if err := decodeBody(w, r, &b, false); err != nil {
		return "", err
	}
	return web.Reason(b.Reason, true)
}

func (h *Handler) batchAction(w http.ResponseWriter, r *http.Request,
	act func(ctx context.Context, id int64, reason string) (*keeltype.BatchRow, error)) (int, any, error) {
	id, err := pathID(r, chi.URLParam(r, "id"))
	if err != nil {
		return 0, nil, err
	}
	reason, err := readBatchReason(w, r)
	if err != nil {
		return 0, nil, err
	}
	row, err := act(r.Context(), id, reason)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, BatchView(row, time.Now()), nil
}

func (h *Handler) batchPause(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return h.batchAction(w, r, h.engine.BatchPause)
}

func (h *Handler) batchResume(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return h.batchAction(w, r, h.engine.BatchResume)
}

func (h *Handler) batchTerminate(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return h.batchAction(w, r, h.engine.BatchTerminate)
}

// batchKeyResume: POST /batches/{id}/keys/{key}/resume; key is the module's
// key ("app:42", path-escaped), not the batch-scoped flow key.
func (h *Handler) batchKeyResume(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r, chi.URLParam(r, "id"))
	if err != nil {
		return 0, nil, err
	}
	key, err := url.PathUnescape(chi.URLParam(r, "key"))
	if err != nil || key == "" || len(key) > 200 {
		return 0, nil, Errorf(CodeInvalidArgument, "key must be 1..200 bytes")
	}
	reason, err := readBatchReason(w, r)
	if err != nil {
		return 0, nil, err
	}
	if _, err := h.engine.BatchGet(r.Context(), id); err != nil {
		return 0, nil, err
	}
	row, err := h.engine.BatchKeyResume(r.Context(), id, key, reason)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, BatchKeyView(id, row), nil
}
