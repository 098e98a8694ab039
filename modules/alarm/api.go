package alarm

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module"
	mweb "github.com/keelwork/keel/module/web"
)

// Routes implements module.Web.
func (m *Module[TTx]) Routes() []module.Route {
	v, o := module.RoleViewer, module.RoleOperator
	return []module.Route{
		{Pattern: "GET /api/v1/alarm/instances", Role: v, Handle: m.apiInstances},
		{Pattern: "GET /api/v1/alarm/instances/{id}", Role: v, Handle: m.apiInstance},
		{Pattern: "POST /api/v1/alarm/instances/{id}/ack", Role: o, Handle: m.apiAck},
		{Pattern: "GET /api/v1/alarm/notices", Role: v, Handle: m.apiNotices},
		{Pattern: "GET /api/v1/alarm/silences", Role: v, Handle: m.apiSilences},
		{Pattern: "POST /api/v1/alarm/silences", Role: o, Handle: m.apiSilenceAdd},
		{Pattern: "POST /api/v1/alarm/devices", Role: o, Handle: m.apiDevice},
		{Pattern: "GET /api/v1/alarm/storm", Role: v, Handle: m.apiStorm},
		{Pattern: "POST /api/v1/alarm/storms/{id}/replay", Role: o, Handle: m.apiReplay},
		{Pattern: "GET /api/v1/alarm/reconciliation", Role: v, Handle: m.apiRecon},
	}
}

func noParams(r *http.Request) error {
	q := mweb.NewQuery(r)
	return q.Err
}

func (m *Module[TTx]) apiInstances(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	q := mweb.NewQuery(r, "state", "device", "rule", "limit")
	state, device, rule, limit := q.Text("state", 16), q.Text("device", 64), q.Text("rule", 64), q.Limit(100)
	if q.Err != nil {
		return 0, nil, q.Err
	}
	if state != "" && StateZH(state) == "未知状态" {
		return 0, nil, mweb.Invalid("state %q is not an instance state", state)
	}
	list, err := m.Instances(r.Context(), state, device, rule, limit)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"instances": list}, nil
}

func (m *Module[TTx]) apiInstance(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	if err := noParams(r); err != nil {
		return 0, nil, err
	}
	id := r.PathValue("id")
	i, err := m.InstanceByID(r.Context(), id)
	if err != nil {
		return 0, nil, err
	}
	if i == nil {
		return 0, nil, mweb.NotFound("no alarm instance %q", id)
	}
	h, err := m.History(r.Context(), id)
	if err != nil {
		return 0, nil, err
	}
	n, err := m.Notices(r.Context(), "", id, 100)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"instance": i, "history": h, "notices": n}, nil
}

func (m *Module[TTx]) apiAck(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if err := noParams(r); err != nil {
		return 0, nil, err
	}
	var body struct {
		Comment string `json:"comment"`
	}
	if err := module.Decode(w, r, &body); err != nil {
		return 0, nil, err
	}
	if len(body.Comment) > 500 {
		return 0, nil, mweb.Invalid("comment is over 500 bytes")
	}
	actor := keel.ActorFrom(r.Context())
	if err := m.Ack(r.Context(), r.PathValue("id"), actor, body.Comment); err != nil {
		return 0, nil, err
	}
	i, err := m.InstanceByID(r.Context(), r.PathValue("id"))
	return http.StatusOK, i, err
}

func (m *Module[TTx]) apiNotices(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	q := mweb.NewQuery(r, "state", "instance", "limit")
	state, inst, limit := q.Text("state", 16), q.Text("instance", 64), q.Limit(100)
	if q.Err != nil {
		return 0, nil, q.Err
	}
	list, err := m.Notices(r.Context(), state, inst, limit)
	if err != nil {
		return 0, nil, err
	}
	t, err := m.Tickets(r.Context(), 100)
	return http.StatusOK, map[string]any{"notices": list, "tickets": t}, err
}

func (m *Module[TTx]) apiSilences(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	if err := noParams(r); err != nil {
		return 0, nil, err
	}
	s, err := m.Silences(r.Context(), 200)
	return http.StatusOK, map[string]any{"silences": s}, err
}

func (m *Module[TTx]) apiSilenceAdd(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if err := noParams(r); err != nil {
		return 0, nil, err
	}
	var body struct {
		Device   string    `json:"device"`
		Rule     string    `json:"rule"`
		StartsAt time.Time `json:"starts_at"`
		EndsAt   time.Time `json:"ends_at"`
		Comment  string    `json:"comment"`
	}
	if err := module.Decode(w, r, &body); err != nil {
		return 0, nil, err
	}
	if err := checkSilence(body.Device, body.Rule, &body.Comment); err != nil {
		return 0, nil, err
	}
	if body.StartsAt.IsZero() {
		body.StartsAt = m.Now()
	}
	id, err := m.AddSilence(r.Context(), Silence{Device: body.Device, Rule: body.Rule, StartsAt: body.StartsAt.UTC(), EndsAt: body.EndsAt.UTC(),
		CreatedBy: keel.ActorFrom(r.Context()), Comment: body.Comment})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, map[string]any{"id": id}, nil
}

func (m *Module[TTx]) apiDevice(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if err := noParams(r); err != nil {
		return 0, nil, err
	}
	var body struct {
		ID      string `json:"id"`
		Name    string `json:"name"`
		Gateway string `json:"gateway"`
	}
	if err := module.Decode(w, r, &body); err != nil {
		return 0, nil, err
	}
	name, err := mweb.OptionalText("name", body.Name, mweb.MaxNameRunes)
	if err != nil {
		return 0, nil, err
	}
	if err := m.RegisterDevice(r.Context(), body.ID, name, body.Gateway); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"id": body.ID}, nil
}

func (m *Module[TTx]) apiStorm(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	if err := noParams(r); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, m.StormPanel(r.Context()), nil
}

func (m *Module[TTx]) apiReplay(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if err := noParams(r); err != nil {
		return 0, nil, err
	}
	var body struct{}
	if err := mweb.DecodeOptional(w, r, &body); err != nil {
		return 0, nil, err
	}
	id, err := mweb.PathID(r, "id") // one spelling of an id: 00001 is refused, not storm 1
	if err != nil {
		return 0, nil, err
	}
	actor := keel.ActorFrom(r.Context())
	// The replay runs in the background (it takes its observation
	// windows); its steps are audited and listed on the storm panel.
	m.Life.Go(func(ctx context.Context) {
		if _, err := m.Replay(ctx, id, actor); err != nil && !errors.Is(err, context.Canceled) {
			m.Log.Warn("alarm: replay", "storm", id, "err", err)
		}
	})
	return http.StatusAccepted, map[string]any{"storm_id": id, "started": true}, nil
}

func (m *Module[TTx]) apiRecon(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	if err := noParams(r); err != nil {
		return 0, nil, err
	}
	res, err := m.ReconcileSevere(r.Context(), m.Now())
	return http.StatusOK, res, err
}

// StormPanelData is the storm panel: backpressure, storms, replays and the
// per-stage counters.
type StormPanelData struct {
	Pressure Pressure         `json:"pressure"`
	Storms   []Storm          `json:"storms"`
	Replays  []ReplayStep     `json:"replays"`
	Counters map[string]int64 `json:"counters"`
	// Compression is instance changes per ordinary notice: how many
	// members one window notice carried on average.
	Compression float64 `json:"compression_ratio"`
}

// StormPanel reads the panel.
func (m *Module[TTx]) StormPanel(ctx context.Context) StormPanelData {
	p := StormPanelData{Pressure: m.Pressure()}
	rows, err := m.DB.Query(ctx, m.q.Get("StormList"), 20)
	if err == nil {
		for rows.Next() {
			var s Storm
			if rows.Scan(&s.ID, &s.State, &s.StartedAt, &s.EndedAt, &s.PeakBacklog) == nil {
				p.Storms = append(p.Storms, s)
			}
		}
		rows.Close()
	}
	p.Replays, _ = m.Replays(ctx, 0)
	p.Counters, _ = m.CounterMap(ctx)
	if g := p.Counters[StageNotice+"/created_ordinary"]; g > 0 {
		p.Compression = float64(p.Counters[StageNotice+"/aggregated_members"]) / float64(g)
	}
	return p
}

// checkSilence applies the one text rule to a silence before anything is
// written: the device and rule are ids (or empty, one of them at least,
// which AddSilence checks), the comment is a reason (trimmed in place).
func checkSilence(device, rule string, comment *string) error {
	for _, f := range []struct{ name, v string }{{"device", device}, {"rule", rule}} {
		if f.v != "" && !idPattern.MatchString(f.v) {
			return mweb.Invalid("%s must be an id of A-Z a-z 0-9 _ . - (1 to 64)", f.name)
		}
	}
	c, err := mweb.Reason(*comment, true)
	if err != nil {
		return err
	}
	*comment = c
	return nil
}
