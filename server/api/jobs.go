package api

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
)

// jobList: GET /jobs?state=&kind=&queue=&flow_key=&cursor=&limit=, newest first.
func (h *Handler) jobList(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	q := newQuery(r, "state", "kind", "queue", "flow_key", "after", "cursor", "limit")
	p := &keel.JobListParams{Kinds: q.names("kind"), Queues: q.names("queue"),
		FlowKey: q.text("flow_key", 256), BeforeID: q.idCursor("j"), Desc: true, Limit: q.limit()}
	for _, s := range q.names("state") {
		st := keeltype.JobState(s)
		if !st.Valid() {
			q.fail(CodeInvalidArgument, "unknown state %q", s)
		}
		p.States = append(p.States, st)
	}
	if q.Err != nil {
		return 0, nil, q.Err
	}
	limit := p.Limit
	p.Limit++
	rows, err := h.engine.JobList(r.Context(), p)
	if err != nil {
		return 0, nil, wrapf(err, "listing jobs")
	}
	page := &Page[*Job]{Data: []*Job{}}
	for i, row := range rows {
		if i == limit {
			page.NextCursor = encodeCursor("j", strconv.FormatInt(rows[i-1].ID, 10))
			break
		}
		page.Data = append(page.Data, JobView(row))
	}
	return http.StatusOK, page, nil
}

func (h *Handler) jobGet(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r, chi.URLParam(r, "id"))
	if err != nil {
		return 0, nil, err
	}
	if q := newQuery(r); q.Err != nil {
		return 0, nil, q.Err
	}
	row, err := h.engine.JobGet(r.Context(), id)
	return ok(jobOrNil(row), err)
}

func jobOrNil(row *keeltype.JobRow) *Job {
	if row == nil {
		return nil
	}
	return JobView(row)
}

// jobAction runs one audited job control action with the body's reason.
func (h *Handler) jobAction(w http.ResponseWriter, r *http.Request,
	act func(h *Handler, r *http.Request, id int64, reason string) (*keeltype.JobRow, error)) (int, any, error) {
	id, err := pathID(r, chi.URLParam(r, "id"))
	if err != nil {
		return 0, nil, err
	}
	reason, err := readReason(w, r)
	if err != nil {
		return 0, nil, err
	}
	row, err := act(h, r, id, reason)
	return ok(jobOrNil(row), err)
}

func (h *Handler) jobCancel(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return h.jobAction(w, r, func(h *Handler, r *http.Request, id int64, reason string) (*keeltype.JobRow, error) {
		return h.engine.JobCancel(r.Context(), id, reason)
	})
}

func (h *Handler) jobRetry(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return h.jobAction(w, r, func(h *Handler, r *http.Request, id int64, reason string) (*keeltype.JobRow, error) {
		return h.engine.JobRetry(r.Context(), id, reason)
	})
}

func (h *Handler) jobDelete(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return h.jobAction(w, r, func(h *Handler, r *http.Request, id int64, reason string) (*keeltype.JobRow, error) {
		return h.engine.JobDelete(r.Context(), id, reason)
	})
}
