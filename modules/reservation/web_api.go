package reservation

import (
	"net/http"
	"time"

	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/web"
)

// apiPrefix is where the module's admin API lives.
const apiPrefix = "/api/v1/reservation"

// minReason is the shortest reason accepted for an audited control action.
const minReason = 5

// Routes implements module.Web: viewers read, operators act on
// reservations, administrators change settings.
func (m *Module[TTx]) Routes() []module.Route {
	v, o, a := module.RoleViewer, module.RoleOperator, module.RoleAdmin
	return []module.Route{
		{Pattern: "GET " + apiPrefix + "/resources", Role: v, Handle: m.apiResources},
		{Pattern: "POST " + apiPrefix + "/resources", Role: a, Handle: m.apiResourceCreate},
		{Pattern: "GET " + apiPrefix + "/slots", Role: v, Handle: m.apiSlots},
		{Pattern: "POST " + apiPrefix + "/slots", Role: a, Handle: m.apiSlotCreate},
		{Pattern: "GET " + apiPrefix + "/slots/{id}", Role: v, Handle: m.apiSlot},
		{Pattern: "POST " + apiPrefix + "/slots/{id}/waitlist", Role: o, Handle: m.apiWaitlistJoin},
		{Pattern: "GET " + apiPrefix + "/reservations", Role: v, Handle: m.apiReservations},
		{Pattern: "POST " + apiPrefix + "/reservations", Role: o, Handle: m.apiBook},
		{Pattern: "GET " + apiPrefix + "/reservations/{id}", Role: v, Handle: m.apiReservation},
		{Pattern: "POST " + apiPrefix + "/reservations/{id}/pay", Role: o, Handle: m.apiPay},
		{Pattern: "POST " + apiPrefix + "/reservations/{id}/check-in", Role: o, Handle: m.apiCheckIn},
		{Pattern: "POST " + apiPrefix + "/reservations/{id}/cancel", Role: o, Handle: m.apiCancel},
		{Pattern: "POST " + apiPrefix + "/reservations/{id}/restore", Role: o, Handle: m.apiRestore},
		{Pattern: "POST " + apiPrefix + "/reservations/{id}/move", Role: o, Handle: m.apiMove},
		{Pattern: "GET " + apiPrefix + "/categories", Role: v, Handle: m.apiCategories},
		{Pattern: "POST " + apiPrefix + "/categories", Role: a, Handle: m.apiCategoryCreate},
		{Pattern: "GET " + apiPrefix + "/categories/{id}", Role: v, Handle: m.apiCategory},
		{Pattern: "PUT " + apiPrefix + "/categories/{id}", Role: a, Handle: m.apiCategoryUpdate},
		{Pattern: "GET " + apiPrefix + "/runs", Role: v, Handle: m.apiRuns},
		{Pattern: "POST " + apiPrefix + "/runs", Role: o, Handle: m.apiRunNow},
		{Pattern: "GET " + apiPrefix + "/dead-letters", Role: v, Handle: m.apiDeadLetters},
		{Pattern: "POST " + apiPrefix + "/dead-letters/{id}/requeue", Role: o, Handle: m.apiRequeue},
		{Pattern: "GET " + apiPrefix + "/policy", Role: v, Handle: m.apiPolicy},
		{Pattern: "PUT " + apiPrefix + "/policy", Role: a, Handle: m.apiPolicySet},
		{Pattern: "GET " + apiPrefix + "/users/{user}/noshows", Role: v, Handle: m.apiNoShows},
		{Pattern: "POST " + apiPrefix + "/users/{user}/noshows/reset", Role: a, Handle: m.apiNoShowReset},
		{Pattern: "POST " + apiPrefix + "/users/{user}/restriction/lift", Role: a, Handle: m.apiRestrictionLift},
		{Pattern: "GET " + apiPrefix + "/invariant", Role: v, Handle: m.apiInvariant},
		{Pattern: "POST " + apiPrefix + "/invariant/repair", Role: a, Handle: m.apiRepair},
	}
}

// reasonBody is the body of control actions that only need a reason.
type reasonBody struct {
	Reason string `json:"reason"`
}

// checkReason applies the one reason rule (web.Reason).
func checkReason(reason string, required bool) error {
	_, err := web.Reason(reason, required)
	return err
}

func decodeReason(w http.ResponseWriter, r *http.Request) (string, error) {
	var b reasonBody
	if err := module.Decode(w, r, &b); err != nil {
		return "", err
	}
	return b.Reason, checkReason(b.Reason, true)
}

func (m *Module[TTx]) apiResources(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if err := knownParams(r); err != nil {
		return 0, nil, err
	}
	list, err := m.Resources(r.Context())
	return http.StatusOK, page(list, ""), err
}

func (m *Module[TTx]) apiResourceCreate(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var b struct {
		CategoryID string `json:"category_id"`
		Name       string `json:"name"`
		Location   string `json:"location"`
	}
	if err := module.Decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	var err error
	if b.Name, err = web.Name("name", b.Name, 200); err != nil {
		return 0, nil, err
	}
	if b.Location, err = web.OptionalText("location", b.Location, 200); err != nil {
		return 0, nil, err
	}
	if b.CategoryID, err = web.Name("category_id", b.CategoryID, 40); err != nil {
		return 0, nil, err
	}
	res, err := m.CreateResource(r.Context(), b.CategoryID, b.Name, b.Location)
	return http.StatusCreated, res, err
}

// apiSlots: GET /slots?resource_id=&from=&to=&limit= (default: the next 24
// hours, and slots still running).
func (m *Module[TTx]) apiSlots(w http.ResponseWriter, r *http.Request) (int, any, error) {
	q := newQuery(r, "resource_id", "from", "to", "limit")
	now := m.now()
	f := SlotFilter{ResourceID: q.id("resource_id"), From: q.time("from", now), Limit: q.limit()}
	f.To = q.time("to", f.From.Add(24*time.Hour))
	if q.err != nil {
		return 0, nil, q.err
	}
	list, err := m.Slots(r.Context(), f)
	return http.StatusOK, page(list, ""), err
}

func (m *Module[TTx]) apiSlotCreate(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var b struct {
		ResourceID int64     `json:"resource_id"`
		StartsAt   time.Time `json:"starts_at"`
		EndsAt     time.Time `json:"ends_at"`
		Capacity   int       `json:"capacity"`
	}
	if err := module.Decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	if err := m.checkResource(r, b.ResourceID); err != nil {
		return 0, nil, err
	}
	s, err := m.CreateSlot(r.Context(), b.ResourceID, b.StartsAt, b.EndsAt, b.Capacity)
	return http.StatusCreated, s, err
}

// apiSlot returns a slot with live availability (releasing its due
// reservations first) and its waitlist.
func (m *Module[TTx]) apiSlot(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if err := knownParams(r); err != nil {
		return 0, nil, err
	}
	id, err := pathInt(r, "id")
	if err != nil {
		return 0, nil, err
	}
	s, err := m.SlotAvailability(r.Context(), id)
	if err != nil {
		return 0, nil, err
	}
	wl, err := m.Waitlist(r.Context(), id)
	return http.StatusOK, map[string]any{"slot": s, "waitlist": wl}, err
}

func (m *Module[TTx]) apiWaitlistJoin(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathInt(r, "id")
	if err != nil {
		return 0, nil, err
	}
	var b struct {
		UserID string `json:"user_id"`
	}
	if err := module.Decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	e, err := m.JoinWaitlist(r.Context(), id, b.UserID)
	return http.StatusCreated, e, err
}

// checkResource refuses a resource id that names no resource, before a
// write would meet the foreign key.
func (m *Module[TTx]) checkResource(r *http.Request, id int64) error {
	if id < 1 {
		return web.Invalid("resource_id must be a positive integer")
	}
	list, err := m.Resources(r.Context())
	if err != nil {
		return err
	}
	for _, res := range list {
		if res.ID == id {
			return nil
		}
	}
	return module.Errorf(http.StatusNotFound, "resource_not_found", "no resource %d", id)
}
