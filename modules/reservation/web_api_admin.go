package reservation

import (
	"context"
	"net/http"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module"
)

func (m *Module[TTx]) apiCategories(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if err := knownParams(r); err != nil {
		return 0, nil, err
	}
	list, err := m.Categories(r.Context())
	return http.StatusOK, page(list, ""), err
}

func (m *Module[TTx]) apiCategory(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if err := knownParams(r); err != nil {
		return 0, nil, err
	}
	c, err := m.Category(r.Context(), r.PathValue("id"))
	return http.StatusOK, c, err
}

// categoryBody is a category's settings with the audit reason (and, to
// update, the version the caller saw).
type categoryBody struct {
	CategorySettings
	ID      string `json:"id,omitempty"`
	Version int64  `json:"version,omitempty"`
	Reason  string `json:"reason"`
}

func (m *Module[TTx]) apiCategoryCreate(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var b categoryBody
	if err := module.Decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	if err := checkReason(b.Reason, true); err != nil {
		return 0, nil, err
	}
	c, err := m.CreateCategory(r.Context(), b.ID, b.CategorySettings, b.Reason)
	return http.StatusCreated, c, err
}

// apiCategoryUpdate replaces a category's settings, the gray switch
// (release_mode: off, dry_run, on) among them; version is required.
func (m *Module[TTx]) apiCategoryUpdate(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var b categoryBody
	if err := module.Decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	if err := checkReason(b.Reason, true); err != nil {
		return 0, nil, err
	}
	if b.Version < 1 {
		return 0, nil, module.Invalid("version: the category's current version is required")
	}
	if b.ID != "" && b.ID != r.PathValue("id") {
		return 0, nil, module.Invalid("id: the body names another category")
	}
	c, err := m.UpdateCategory(r.Context(), r.PathValue("id"), b.Version, b.CategorySettings, b.Reason)
	return http.StatusOK, c, err
}

// apiRuns: GET /runs?kind=scan|compensation&cursor=&limit=, newest first.
func (m *Module[TTx]) apiRuns(w http.ResponseWriter, r *http.Request) (int, any, error) {
	q := newQuery(r, "kind", "after", "cursor", "limit")
	kind, before, limit := q.text("kind", 20), q.cursor(), q.limit()
	if kind != "" && kind != "scan" && kind != "compensation" {
		q.fail("kind: scan or compensation")
	}
	if q.err != nil {
		return 0, nil, q.err
	}
	list, err := m.Runs(r.Context(), kind, before, limit+1)
	if err != nil {
		return 0, nil, err
	}
	next := ""
	if len(list) > limit {
		list = list[:limit]
		next = encodeCursor(list[limit-1].ID)
	}
	return http.StatusOK, page(list, next), nil
}

// apiRunNow runs one scan now on this instance and returns its record.
func (m *Module[TTx]) apiRunNow(w http.ResponseWriter, r *http.Request) (int, any, error) {
	reason, err := decodeReason(w, r)
	if err != nil {
		return 0, nil, err
	}
	run, err := m.ScanNow(r.Context(), reason)
	return http.StatusOK, run, err
}

func (m *Module[TTx]) apiDeadLetters(w http.ResponseWriter, r *http.Request) (int, any, error) {
	q := newQuery(r, "after", "cursor", "limit")
	f := ReservationFilter{DeadLetters: true, Before: q.cursor(), Limit: q.limit()}
	if q.err != nil {
		return 0, nil, q.err
	}
	return m.reservationPage(r, f)
}

func (m *Module[TTx]) apiRequeue(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathInt(r, "id")
	if err != nil {
		return 0, nil, err
	}
	reason, err := decodeReason(w, r)
	if err != nil {
		return 0, nil, err
	}
	if err := m.RequeueDeadLetter(r.Context(), id, reason); err != nil {
		return 0, nil, err
	}
	res, err := m.Reservation(r.Context(), id)
	return http.StatusOK, res, err
}

func (m *Module[TTx]) apiPolicy(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if err := knownParams(r); err != nil {
		return 0, nil, err
	}
	p, err := m.Policy(r.Context())
	return http.StatusOK, p, err
}

func (m *Module[TTx]) apiPolicySet(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var b struct {
		Enabled      bool   `json:"enabled"`
		Threshold    int    `json:"threshold"`
		WindowDays   int    `json:"window_days"`
		RestrictDays int    `json:"restrict_days"`
		Version      int64  `json:"version"`
		Reason       string `json:"reason"`
	}
	if err := module.Decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	if err := checkReason(b.Reason, true); err != nil {
		return 0, nil, err
	}
	p, err := m.SetPolicy(r.Context(), Policy{Enabled: b.Enabled, Threshold: b.Threshold, WindowDays: b.WindowDays,
		RestrictDays: b.RestrictDays, Version: b.Version}, b.Reason)
	return http.StatusOK, p, err
}

func (m *Module[TTx]) apiNoShows(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if err := knownParams(r); err != nil {
		return 0, nil, err
	}
	user := r.PathValue("user")
	if err := validUser(user); err != nil {
		return 0, nil, err
	}
	rec, err := m.NoShows(r.Context(), user)
	return http.StatusOK, rec, err
}

func (m *Module[TTx]) apiNoShowReset(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return m.userAction(w, r, m.ResetNoShows)
}

func (m *Module[TTx]) apiRestrictionLift(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return m.userAction(w, r, m.LiftRestriction)
}

func (m *Module[TTx]) userAction(w http.ResponseWriter, r *http.Request, act func(ctx context.Context, user, reason string) error) (int, any, error) {
	user := r.PathValue("user")
	if err := validUser(user); err != nil {
		return 0, nil, err
	}
	reason, err := decodeReason(w, r)
	if err != nil {
		return 0, nil, err
	}
	if err := act(r.Context(), user, reason); err != nil {
		return 0, nil, err
	}
	rec, err := m.NoShows(r.Context(), user)
	return http.StatusOK, rec, err
}

// InvariantReport is the capacity reconciliation: slots whose held count
// differs from their holding reservations, and reservations released more
// than once. Both must be empty.
type InvariantReport struct {
	Drifts         []SlotDrift `json:"drifts"`
	DoubleReleases int         `json:"double_releases"`
	DeadLetters    int         `json:"dead_letters"`
	// Due is the backlog: paid reservations past their release point that
	// no run has released yet (failed ones excluded).
	Due int `json:"due"`
	// DueDryRun is the part of Due in dry-run categories, which a run
	// records and never releases.
	DueDryRun int `json:"due_dry_run"`
}

func (m *Module[TTx]) invariant(r *http.Request) (*InvariantReport, error) {
	rep := &InvariantReport{Drifts: []SlotDrift{}}
	drifts, err := m.CheckInvariant(r.Context(), 0)
	if err != nil {
		return nil, err
	}
	if len(drifts) > 0 {
		rep.Drifts = drifts
	}
	if rep.DoubleReleases, err = m.DoubleReleases(r.Context()); err != nil {
		return nil, err
	}
	if rep.DeadLetters, err = m.DeadLetterCount(r.Context()); err != nil {
		return nil, err
	}
	rep.Due, err = m.DueCount(r.Context())
	if err == nil {
		rep.DueDryRun, err = m.DueDryRunCount(r.Context())
	}
	return rep, err
}

func (m *Module[TTx]) apiInvariant(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if err := knownParams(r); err != nil {
		return 0, nil, err
	}
	rep, err := m.invariant(r)
	return http.StatusOK, rep, err
}

func (m *Module[TTx]) apiRepair(w http.ResponseWriter, r *http.Request) (int, any, error) {
	reason, err := decodeReason(w, r)
	if err != nil {
		return 0, nil, err
	}
	fixed, err := m.RepairDrift(r.Context(), reason)
	if fixed == nil {
		fixed = []SlotDrift{}
	}
	return http.StatusOK, map[string]any{"repaired": fixed}, err
}

// ScanNow runs one scan at an operator's request, audited.
func (m *Module[TTx]) ScanNow(ctx context.Context, reason string) (*Run, error) {
	client, err := m.engine()
	if err != nil {
		return nil, err
	}
	if err := client.AuditRecord(ctx, keel.Audit{Action: "reservation.scan_now", Target: "reservation:scan", Reason: reason}); err != nil {
		return nil, err
	}
	return m.Scan(ctx)
}
