package tracking

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
	mweb "github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/ingest"
	"github.com/keelwork/keel/modules/tracking/store"
)

// APIPrefix is where the module's admin API lives.
const APIPrefix = "/api/v1/tracking"

// Routes implements module.Web.
func (m *Module[TTx]) Routes() []module.Route {
	v, o, a := module.RoleViewer, module.RoleOperator, module.RoleAdmin
	return []module.Route{
		{Pattern: "GET " + APIPrefix + "/waybills", Role: v, Handle: m.apiSearch},
		{Pattern: "GET " + APIPrefix + "/waybills/{carrier}/{waybill}", Role: v, Handle: m.apiWaybill},
		{Pattern: "POST " + APIPrefix + "/waybills/{carrier}/{waybill}/refresh", Role: o, Handle: m.apiRefresh},
		{Pattern: "GET " + APIPrefix + "/carriers", Role: v, Handle: m.apiCarriers},
		{Pattern: "GET " + APIPrefix + "/carriers/{carrier}/mappings", Role: v, Handle: m.apiMappings},
		{Pattern: "POST " + APIPrefix + "/carriers/{carrier}/mappings", Role: a, Handle: m.apiMappingCreate},
		{Pattern: "POST " + APIPrefix + "/carriers/{carrier}/mappings/{version}/replay", Role: o, Handle: m.apiReplay},
		{Pattern: "POST " + APIPrefix + "/carriers/{carrier}/mappings/{version}/activate", Role: a, Handle: m.apiActivate},
		{Pattern: "GET " + APIPrefix + "/collisions", Role: v, Handle: m.apiCollisions},
		{Pattern: "GET " + APIPrefix + "/security", Role: v, Handle: m.apiSecurity},
	}
}

// pathWaybill reads and checks {carrier} and {waybill}.
func (m *Module[TTx]) pathWaybill(r *http.Request) (*domain.Carrier, string, error) {
	c, err := m.carrier(r.PathValue("carrier"))
	if err != nil {
		return nil, "", err
	}
	wb := r.PathValue("waybill")
	if !domain.ValidWaybill(wb) {
		return nil, "", mweb.Invalid("waybill must be 4-40 of A-Z a-z 0-9 -")
	}
	return c, wb, nil
}

func (m *Module[TTx]) pathVersion(r *http.Request) (*domain.Carrier, int, error) {
	c, err := m.carrier(r.PathValue("carrier"))
	if err != nil {
		return nil, 0, err
	}
	v, err := strconv.Atoi(r.PathValue("version"))
	if err != nil || v < 1 || v > 1_000_000 {
		return nil, 0, mweb.Invalid("version must be a positive integer")
	}
	return c, v, nil
}

// searchParams reads ?q=&carrier=&limit=.
func (m *Module[TTx]) searchParams(r *http.Request) (string, string, int, error) {
	q := mweb.NewQuery(r, "q", "carrier", "limit")
	text := q.Text("q", 40)
	carrier := q.Get("carrier")
	limit := q.Limit(50)
	if q.Err != nil {
		return "", "", 0, q.Err
	}
	for i := 0; i < len(text); i++ {
		if c := text[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return "", "", 0, mweb.Invalid("q is the start of a waybill number: A-Z a-z 0-9 -")
		}
	}
	if carrier != "" {
		if _, err := m.carrier(carrier); err != nil {
			return "", "", 0, mweb.Invalid("no carrier %q", carrier)
		}
	}
	return text, carrier, limit, nil
}

// WaybillSummary is a search result.
type WaybillSummary struct {
	Carrier     string      `json:"carrier"`
	Waybill     string      `json:"waybill"`
	View        domain.View `json:"view"`
	Events      int64       `json:"events"`
	LastEventAt string      `json:"last_event_at"`
}

func (m *Module[TTx]) search(ctx context.Context, q, carrier string, limit int) ([]store.Waybill, error) {
	return m.store.Search(ctx, q, carrier, limit)
}

func (m *Module[TTx]) apiSearch(w http.ResponseWriter, r *http.Request) (int, any, error) {
	q, carrier, limit, err := m.searchParams(r)
	if err != nil {
		return 0, nil, err
	}
	ws, err := m.search(r.Context(), q, carrier, limit)
	if err != nil {
		return 0, nil, err
	}
	out := make([]map[string]any, 0, len(ws))
	for _, x := range ws {
		out = append(out, map[string]any{"carrier": x.Carrier, "waybill": x.Waybill, "milestone": x.State.Milestone,
			"seq": x.State.Seq, "revision": x.State.Revision, "events": x.Events, "last_event_at": x.LastEventAt})
	}
	return http.StatusOK, mweb.NewList(out, ""), nil
}

// WaybillDetail is everything known of a waybill.
type WaybillDetail struct {
	Carrier    string                `json:"carrier"`
	Waybill    string                `json:"waybill"`
	View       domain.View           `json:"view"`
	Seq        int64                 `json:"seq"`
	Revision   int64                 `json:"revision"`
	Mapping    int                   `json:"mapping_version"`
	Timeline   []store.TimelineEntry `json:"timeline"`
	Gaps       []store.Gap           `json:"gaps"`
	Collisions []store.Collision     `json:"collisions"`
}

func (m *Module[TTx]) detail(ctx context.Context, c *domain.Carrier, wb string) (*WaybillDetail, error) {
	v, err := m.CustomerView(ctx, c.Code, wb)
	if err != nil {
		return nil, err
	}
	agg, err := m.store.GetWaybill(ctx, nil, c.Code, wb)
	if err != nil {
		return nil, err
	}
	d := &WaybillDetail{Carrier: c.Code, Waybill: wb, View: v, Seq: agg.State.Seq, Revision: agg.State.Revision, Mapping: agg.MappingVersion}
	if d.Timeline, err = m.store.Timeline(ctx, c.Code, wb); err != nil {
		return nil, err
	}
	if d.Gaps, err = m.store.Gaps(ctx, nil, c.Code, wb); err != nil {
		return nil, err
	}
	if d.Collisions, err = m.store.Collisions(ctx, c.Code, wb, 50); err != nil {
		return nil, err
	}
	return d, nil
}

func (m *Module[TTx]) apiWaybill(w http.ResponseWriter, r *http.Request) (int, any, error) {
	c, wb, err := m.pathWaybill(r)
	if err != nil {
		return 0, nil, err
	}
	d, err := m.detail(r.Context(), c, wb)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, d, nil
}

// Refresh queues a realtime query of a waybill on the carrier's realtime
// share (one per waybill while one is pending).
func (m *Module[TTx]) Refresh(ctx context.Context, carrier, waybill string) (bool, error) {
	c, err := m.carrier(carrier)
	if err != nil {
		return false, err
	}
	client, err := m.Client()
	if err != nil {
		return false, err
	}
	j := ingest.RealtimeJob(c, waybill, "")
	res, err := client.InsertMany(ctx, []keel.InsertParams{j})
	if err != nil {
		return false, err
	}
	return len(res) == 1, nil
}

func (m *Module[TTx]) apiRefresh(w http.ResponseWriter, r *http.Request) (int, any, error) {
	c, wb, err := m.pathWaybill(r)
	if err != nil {
		return 0, nil, err
	}
	if _, err := m.store.GetWaybill(r.Context(), nil, c.Code, wb); errors.Is(err, store.ErrNotFound) {
		return 0, nil, fmt.Errorf("%w: no waybill %s of %s", keeltype.ErrNotFound, wb, c.Code)
	}
	if _, err := m.Refresh(r.Context(), c.Code, wb); err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, map[string]any{"queued": true, "flow_key": c.RealtimeKey()}, nil
}

func (m *Module[TTx]) apiCarriers(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if q := mweb.NewQuery(r); q.Err != nil { // the whole list: no parameters
		return 0, nil, q.Err
	}
	hs, err := m.Healths(r.Context())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, mweb.NewList(hs, ""), nil
}

// MappingsView is a carrier's mapping versions, the active codes and the
// replays with their diffs.
type MappingsView struct {
	Carrier  string                      `json:"carrier"`
	Versions []store.MappingVersion      `json:"versions"`
	Active   map[string]domain.Milestone `json:"active_codes"`
	Replays  []ReplayResult              `json:"replays"`
}

func (m *Module[TTx]) mappings(ctx context.Context, c *domain.Carrier) (*MappingsView, error) {
	mv := &MappingsView{Carrier: c.Code, Active: map[string]domain.Milestone{}}
	var err error
	if mv.Versions, err = m.store.MappingVersions(ctx, c.Code); err != nil {
		return nil, err
	}
	if act, err := m.store.ActiveMapping(ctx, nil, c.Code); err != nil {
		return nil, err
	} else if act != nil {
		mv.Active = act.Codes
	}
	if mv.Replays, err = m.Replays(ctx, c.Code, 20); err != nil {
		return nil, err
	}
	return mv, nil
}

func (m *Module[TTx]) apiMappings(w http.ResponseWriter, r *http.Request) (int, any, error) {
	c, err := m.carrier(r.PathValue("carrier"))
	if err != nil {
		return 0, nil, err
	}
	mv, err := m.mappings(r.Context(), c)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, mv, nil
}

type mappingCreate struct {
	Codes map[string]string `json:"codes"`
	Note  string            `json:"note"`
}

func (m *Module[TTx]) apiMappingCreate(w http.ResponseWriter, r *http.Request) (int, any, error) {
	c, err := m.carrier(r.PathValue("carrier"))
	if err != nil {
		return 0, nil, err
	}
	var in mappingCreate
	if err := module.Decode(w, r, &in); err != nil {
		return 0, nil, err
	}
	note, err := mweb.Reason(in.Note, true)
	if err != nil {
		return 0, nil, err
	}
	codes := map[string]domain.Milestone{}
	for code, ms := range in.Codes {
		mm, err := domain.ParseMilestone(ms)
		if err != nil {
			return 0, nil, mweb.Invalid("codes.%s: %v", code, err)
		}
		codes[code] = mm
	}
	v, err := m.CreateMapping(r.Context(), c.Code, codes, note, keel.ActorFrom(r.Context()))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, map[string]any{"carrier": c.Code, "version": v, "state": "draft"}, nil
}

func (m *Module[TTx]) apiReplay(w http.ResponseWriter, r *http.Request) (int, any, error) {
	c, v, err := m.pathVersion(r)
	if err != nil {
		return 0, nil, err
	}
	res, err := m.ReplayMapping(r.Context(), c.Code, v, keel.ActorFrom(r.Context()))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, res, nil
}

type activateReq struct {
	Reason string `json:"reason"`
}

func (m *Module[TTx]) apiActivate(w http.ResponseWriter, r *http.Request) (int, any, error) {
	c, v, err := m.pathVersion(r)
	if err != nil {
		return 0, nil, err
	}
	var in activateReq
	if err := module.Decode(w, r, &in); err != nil {
		return 0, nil, err
	}
	reason, err := mweb.Reason(in.Reason, true)
	if err != nil {
		return 0, nil, err
	}
	n, err := m.ActivateMapping(r.Context(), c.Code, v, keel.ActorFrom(r.Context()), reason)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"carrier": c.Code, "version": v, "state": "active", "applied_waiting_events": n}, nil
}

func (m *Module[TTx]) apiCollisions(w http.ResponseWriter, r *http.Request) (int, any, error) {
	q := mweb.NewQuery(r, "carrier", "limit")
	carrier, limit := q.Get("carrier"), q.Limit(50)
	if q.Err != nil {
		return 0, nil, q.Err
	}
	cs, err := m.store.Collisions(r.Context(), carrier, "", limit)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, mweb.NewList(cs, ""), nil
}

func (m *Module[TTx]) apiSecurity(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if q := mweb.NewQuery(r); q.Err != nil { // the whole list: no parameters
		return 0, nil, q.Err
	}
	rows, err := m.store.SecurityCounts(r.Context())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, mweb.NewList(rows, ""), nil
}
