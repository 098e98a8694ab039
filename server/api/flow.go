package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module/web"
)

func (h *Handler) limitList(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	q := newQuery(r)
	if q.Err != nil {
		return 0, nil, q.Err
	}
	ls, err := h.engine.FlowLimits(r.Context())
	if err != nil {
		return 0, nil, wrapf(err, "listing flow limits")
	}
	page := &Page[*FlowLimit]{Data: []*FlowLimit{}}
	for _, l := range ls {
		page.Data = append(page.Data, FlowLimitView(l))
	}
	return http.StatusOK, page, nil
}

func (h *Handler) limitSet(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var body FlowLimit
	if err := decodeBody(w, r, &body, false); err != nil {
		return 0, nil, err
	}
	reason, err := web.Reason(body.Reason, false)
	if err != nil {
		return 0, nil, err
	}
	if body.Pattern, err = web.Pattern("pattern", body.Pattern); err != nil {
		return 0, nil, err
	}
	if body.Queue != "" {
		if _, err := web.Identifier("queue", body.Queue); err != nil {
			return 0, nil, err
		}
	}
	if body.UpdatedAt != nil || body.UpdatedBy != "" {
		return 0, nil, Errorf(CodeInvalidArgument, "updated_at and updated_by are set by the server")
	}
	l, err := body.engineLimit()
	if err != nil {
		return 0, nil, err
	}
	out, err := h.engine.FlowLimitSet(r.Context(), l, reason)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, FlowLimitView(out), nil
}

type limitDeleteBody struct {
	Pattern string `json:"pattern"`
	Queue   string `json:"queue"`
	Reason  string `json:"reason"`
}

func (h *Handler) limitDelete(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var body limitDeleteBody
	if err := decodeBody(w, r, &body, false); err != nil {
		return 0, nil, err
	}
	if _, err := web.Pattern("pattern", body.Pattern); err != nil {
		return 0, nil, err
	}
	reason, err := web.Reason(body.Reason, false)
	if err != nil {
		return 0, nil, err
	}
	if err := h.engine.FlowLimitDelete(r.Context(), body.Pattern, body.Queue, reason); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

// keyList: GET /flow/keys?prefix=&paused=&tripped=&finished=&cursor=&limit=,
// key order. The keys of finished batches are left out unless finished=true.
func (h *Handler) keyList(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	q := newQuery(r, "prefix", "paused", "tripped", "finished", "after", "cursor", "limit")
	after, _ := q.cursor("k")
	p := &keel.FlowKeyListParams{Prefix: q.text("prefix", 256), After: after,
		OnlyPaused: q.boolean("paused"), OnlyTripped: q.boolean("tripped"), HideFinishedBatches: !q.boolean("finished"),
		Limit: q.limit() + 1}
	if q.Err != nil {
		return 0, nil, q.Err
	}
	rows, err := h.engine.FlowKeyList(r.Context(), p)
	if err != nil {
		return 0, nil, wrapf(err, "listing flow keys")
	}
	page := &Page[*FlowKey]{Data: []*FlowKey{}}
	for i, k := range rows {
		if i == p.Limit-1 {
			page.NextCursor = encodeCursor("k", rows[i-1].Key)
			break
		}
		page.Data = append(page.Data, FlowKeyView(k, nil))
	}
	return http.StatusOK, page, nil
}

func flowKey(r *http.Request) (string, error) {
	k, err := url.PathUnescape(chi.URLParam(r, "key"))
	if err != nil {
		return "", Errorf(CodeInvalidArgument, "flow key must be path-escaped text")
	}
	return web.Pattern("flow key", k)
}

func (h *Handler) keyGet(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	key, err := flowKey(r)
	if err != nil {
		return 0, nil, err
	}
	if q := newQuery(r); q.Err != nil {
		return 0, nil, q.Err
	}
	row, err := h.engine.FlowKeyGet(r.Context(), key)
	if err != nil {
		return 0, nil, err
	}
	stats, err := h.engine.FlowKeyStats(r.Context(), []string{key})
	if err != nil {
		return 0, nil, wrapf(err, "reading flow key stats")
	}
	var st *keeltype.FlowKeyStats
	if len(stats) > 0 {
		st = stats[0]
	}
	return http.StatusOK, FlowKeyView(row, st), nil
}

func (h *Handler) keyAction(w http.ResponseWriter, r *http.Request,
	act func(ctx context.Context, key, reason string) (*keeltype.FlowKeyRow, error)) (int, any, error) {
	key, err := flowKey(r)
	if err != nil {
		return 0, nil, err
	}
	reason, err := readReason(w, r)
	if err != nil {
		return 0, nil, err
	}
	row, err := act(r.Context(), key, reason)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, FlowKeyView(row, nil), nil
}

func (h *Handler) keyPause(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return h.keyAction(w, r, h.engine.FlowKeyPause)
}

func (h *Handler) keyResume(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return h.keyAction(w, r, h.engine.FlowKeyResume)
}

func (h *Handler) keyCloseBreaker(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return h.keyAction(w, r, h.engine.FlowKeyCloseBreaker)
}
