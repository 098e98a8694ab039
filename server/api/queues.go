package api

import (
	"context"
	"net/http"
	"sort"

	"github.com/go-chi/chi/v5"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module/web"
)

// Queues merges the persisted queue rows with live depth, by name. Every
// queue is listed (queues are few; there is no cap).
func Queues(ctx context.Context, e Engine) ([]*Queue, error) {
	rows, err := e.QueueList(ctx)
	if err != nil {
		return nil, wrapf(err, "listing queues")
	}
	stats, err := e.QueueStats(ctx)
	if err != nil {
		return nil, wrapf(err, "reading queue depth")
	}
	byName := map[string]*Queue{}
	get := func(name string) *Queue {
		if q, ok := byName[name]; ok {
			return q
		}
		q := &Queue{Name: name, Counts: map[keeltype.JobState]int64{}}
		byName[name] = q
		return q
	}
	for _, row := range rows {
		q := get(row.Name)
		q.Paused, q.PausedAt, q.PausedBy = row.PausedAt != nil, row.PausedAt, row.PausedBy
	}
	for _, s := range stats {
		q := get(s.Queue)
		q.Counts, q.OldestAgeSeconds = s.Counts, ageSeconds(s.OldestAvailable)
		q.Paused = q.Paused || s.Paused
	}
	out := make([]*Queue, 0, len(byName))
	for _, q := range byName {
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (h *Handler) queueList(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	q := newQuery(r)
	if q.Err != nil {
		return 0, nil, q.Err
	}
	qs, err := Queues(r.Context(), h.engine)
	return ok(&Page[*Queue]{Data: qs}, err)
}

func queueName(r *http.Request) (string, error) {
	return web.Identifier("queue name", chi.URLParam(r, "name"))
}

func (h *Handler) queuePause(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return h.queueAction(w, r, h.engine.QueuePause)
}

func (h *Handler) queueResume(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return h.queueAction(w, r, h.engine.QueueResume)
}

func (h *Handler) queueAction(w http.ResponseWriter, r *http.Request,
	act func(ctx context.Context, queue, reason string) (*keeltype.QueueRow, error)) (int, any, error) {
	name, err := queueName(r)
	if err != nil {
		return 0, nil, err
	}
	reason, err := readReason(w, r)
	if err != nil {
		return 0, nil, err
	}
	row, err := act(r.Context(), name, reason)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, &Queue{Name: row.Name, Paused: row.PausedAt != nil, PausedAt: row.PausedAt, PausedBy: row.PausedBy}, nil
}
