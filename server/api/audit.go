package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/server/auth"
)

// auditList: GET /audit?actor=&action=&target=&since=&until=&cursor=&limit=,
// newest first; action is a prefix ("queue.").
func (h *Handler) auditList(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	q := newQuery(r, "actor", "action", "target", "since", "until", "after", "cursor", "limit")
	p := &keel.AuditListParams{Actor: q.text("actor", 200), Action: q.text("action", 200),
		Target: q.text("target", 300), Since: q.time("since"), Until: q.time("until"), BeforeID: q.idCursor("a"),
		Limit: q.limit() + 1}
	if q.Err != nil {
		return 0, nil, q.Err
	}
	rows, err := h.engine.AuditList(r.Context(), p)
	if err != nil {
		return 0, nil, wrapf(err, "listing audit log")
	}
	page := &Page[*Audit]{Data: []*Audit{}}
	for i, a := range rows {
		if i == p.Limit-1 {
			page.NextCursor = encodeCursor("a", strconv.FormatInt(rows[i-1].ID, 10))
			break
		}
		page.Data = append(page.Data, &Audit{ID: a.ID, At: a.At, Actor: a.Actor, Action: a.Action, Target: a.Target,
			Reason: a.Reason, Context: rawOrNil(a.Context)})
	}
	return http.StatusOK, page, nil
}

func (q *query) time(param string) *time.Time {
	s := q.r.URL.Query().Get(param)
	if s == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		q.fail(CodeInvalidArgument, "%s must be an RFC 3339 time", param)
		return nil
	}
	return &t
}

func (h *Handler) tokenStore() (*auth.Store, error) {
	if h.store == nil {
		return nil, Errorf(CodeNotFound, "this server manages no tokens")
	}
	return h.store, nil
}

func (h *Handler) tokenList(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	q := newQuery(r, "after", "cursor", "limit")
	after, limit := q.idCursor("t"), q.limit()
	if q.Err != nil {
		return 0, nil, q.Err
	}
	st, err := h.tokenStore()
	if err != nil {
		return 0, nil, err
	}
	ts, err := st.ListTokens(r.Context(), after, limit+1)
	if err != nil {
		return 0, nil, err
	}
	page := &Page[*auth.Token]{Data: []*auth.Token{}}
	for i, t := range ts {
		if i == limit {
			page.NextCursor = encodeCursor("t", strconv.FormatInt(ts[i-1].ID, 10))
			break
		}
		page.Data = append(page.Data, t)
	}
	return http.StatusOK, page, nil
}

type tokenCreateBody struct {
	Name   string `json:"name"`
	Role   string `json:"role"`
	Reason string `json:"reason"`
}

func (h *Handler) tokenCreate(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var body tokenCreateBody
	if err := decodeBody(w, r, &body, false); err != nil {
		return 0, nil, err
	}
	role, err := auth.ParseRole(body.Role)
	if err != nil {
		return 0, nil, Errorf(CodeInvalidArgument, "role must be viewer, operator or admin")
	}
	name, err := web.Name("name", body.Name, 100)
	if err != nil {
		return 0, nil, err
	}
	reason, err := web.Reason(body.Reason, false)
	if err != nil {
		return 0, nil, err
	}
	st, err := h.tokenStore()
	if err != nil {
		return 0, nil, err
	}
	ctx := r.Context()
	secret, t, err := st.CreateToken(ctx, name, role, keel.ActorFrom(ctx), reason)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, &CreatedToken{ID: t.ID, Name: t.Name, Role: t.Role, Secret: secret}, nil
}

func (h *Handler) tokenRevoke(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r, chi.URLParam(r, "id"))
	if err != nil {
		return 0, nil, err
	}
	reason, err := readReason(w, r)
	if err != nil {
		return 0, nil, err
	}
	st, err := h.tokenStore()
	if err != nil {
		return 0, nil, err
	}
	t, err := st.RevokeToken(r.Context(), id, reason)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, t, nil
}
