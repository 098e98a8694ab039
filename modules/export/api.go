package export

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/web"
)

const apiPrefix = "/api/v1/exports"

// Routes are the module's API.
func (m *Module[TTx]) Routes() []module.Route {
	return []module.Route{
		{Pattern: "POST " + apiPrefix, Role: module.RoleOperator, Handle: m.apiCreate},
		{Pattern: "GET " + apiPrefix, Role: module.RoleViewer, Handle: m.apiList},
		{Pattern: "GET " + apiPrefix + "/{id}", Role: module.RoleViewer, Handle: m.apiGet},
		{Pattern: "POST " + apiPrefix + "/{id}/cancel", Role: module.RoleOperator, Handle: m.apiCancel},
		{Pattern: "POST " + apiPrefix + "/{id}/retry", Role: module.RoleOperator, Handle: m.apiRetry},
		{Pattern: "GET " + apiPrefix + "/{id}/download", Role: module.RoleViewer, Handle: m.apiDownload},
	}
}

// TaskView is a task with its shards, as the API returns it.
type TaskView struct {
	*Task
	Progress float64 `json:"progress"`
	Shards   []Shard `json:"shards,omitempty"`
}

func (m *Module[TTx]) apiCreate(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req Request
	if err := module.Decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	t, err := m.Create(r.Context(), req)
	if err != nil {
		return 0, nil, err
	}
	status := http.StatusCreated
	if t.Existing {
		status = http.StatusOK
	}
	return status, TaskView{Task: t, Progress: t.Progress()}, nil
}

func (m *Module[TTx]) apiList(w http.ResponseWriter, r *http.Request) (int, any, error) {
	q := web.NewQuery(r, "tenant", "user", "limit", "after")
	tenant, user := q.Text("tenant", 200), q.Text("user", 200)
	limit := q.Limit(50)
	after := q.AfterID("export")
	if q.Err != nil {
		return 0, nil, q.Err
	}
	ts, err := m.Tasks(r.Context(), tenant, user, after, limit)
	if err != nil {
		return 0, nil, err
	}
	out := make([]TaskView, len(ts))
	for i, t := range ts {
		out[i] = TaskView{Task: t, Progress: t.Progress()}
	}
	next := ""
	if len(ts) == limit {
		next = web.IDCursor("export", ts[len(ts)-1].ID)
	}
	return http.StatusOK, web.NewList(out, next), nil
}

func (m *Module[TTx]) view(ctx context.Context, id int64) (*TaskView, error) {
	t, err := m.Task(ctx, id)
	if err != nil {
		return nil, err
	}
	shards, err := m.Shards(ctx, id)
	if err != nil {
		return nil, err
	}
	return &TaskView{Task: t, Progress: t.Progress(), Shards: shards}, nil
}

func (m *Module[TTx]) apiGet(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := web.PathID(r, "id")
	if err != nil {
		return 0, nil, err
	}
	v, err := m.view(r.Context(), id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, v, nil
}

type reasonBody struct {
	Reason string `json:"reason"`
}

func (m *Module[TTx]) apiCancel(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return m.apiAct(w, r, m.Cancel)
}

func (m *Module[TTx]) apiRetry(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return m.apiAct(w, r, m.Retry)
}

func (m *Module[TTx]) apiAct(w http.ResponseWriter, r *http.Request, act func(context.Context, int64, string) (*Task, error)) (int, any, error) {
	id, err := web.PathID(r, "id")
	if err != nil {
		return 0, nil, err
	}
	var b reasonBody
	if err := module.Decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	reason, err := web.Reason(b.Reason, true)
	if err != nil {
		return 0, nil, err
	}
	t, err := act(r.Context(), id, reason)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, TaskView{Task: t, Progress: t.Progress()}, nil
}

// apiDownload streams the published file from the store after checking,
// again, that the requesting user may export this tenant's orders now.
func (m *Module[TTx]) apiDownload(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := web.PathID(r, "id")
	if err != nil {
		return 0, nil, err
	}
	if err := m.Download(r.Context(), id, w); err != nil {
		return 0, nil, err
	}
	// The file is written; the server's JSON writer finds the header sent
	// and adds nothing.
	return http.StatusOK, nil, nil
}

// Download checks the actor's permissions again and streams task id's file
// to w (a ResponseWriter gets its headers).
func (m *Module[TTx]) Download(ctx context.Context, id int64, w io.Writer) error {
	t, err := m.Task(ctx, id)
	if err != nil {
		return err
	}
	if t.State != StateSucceeded {
		return module.Errorf(http.StatusConflict, CodeNotReady, "export %d has no file yet: it is %s", id, t.State)
	}
	user := keel.ActorFrom(ctx)
	perms, err := m.Grants(ctx, t.Tenant, user)
	if err != nil {
		return err
	}
	if !slices.Contains(perms, PermExport) || (slices.Contains(t.Params.Columns, "amount_minor") && !slices.Contains(perms, PermAmount)) {
		return module.Errorf(http.StatusForbidden, CodeForbidden, "user %s may no longer download exports of tenant %s", user, t.Tenant)
	}
	rd, err := m.bucket.NewReader(ctx, t.ObjectKey, nil)
	if err != nil {
		return fmt.Errorf("export: opening %s: %w", t.ObjectKey, err)
	}
	defer rd.Close()
	if hw, ok := w.(http.ResponseWriter); ok {
		name := fmt.Sprintf("export-%d.%s", t.ID, t.Format)
		if t.Gzip {
			name += ".gz"
		}
		hw.Header().Set("Content-Type", rd.ContentType())
		hw.Header().Set("Content-Length", strconv.FormatInt(rd.Size(), 10))
		hw.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
		hw.Header().Set("X-Content-SHA256", t.ObjectSHA256)
		hw.WriteHeader(http.StatusOK)
	}
	_, err = io.Copy(w, rd)
	return err
}
