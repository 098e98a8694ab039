package reservation

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module"
)

// pageSize is the rows of one console page.
const pageSize = 50

func (m *Module[TTx]) pageSlots(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	q := r.URL.Query()
	resource, _ := strconv.ParseInt(q.Get("resource"), 10, 64)
	now := m.now()
	day := now.In(m.set.zone)
	if d, err := time.ParseInLocation("2006-01-02", q.Get("day"), m.set.zone); err == nil {
		day = d
	}
	from := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, m.set.zone)
	slots, err := m.Slots(r.Context(), SlotFilter{ResourceID: resource, From: from, To: from.AddDate(0, 0, 1)})
	if err != nil {
		return nil, err
	}
	// Reading availability releases the due reservations of slots in
	// progress first (only they can have any).
	for i, s := range slots {
		if !s.StartsAt.After(now) && s.EndsAt.After(now) {
			if fresh, err := m.SlotAvailability(r.Context(), s.ID); err == nil {
				slots[i] = fresh
			}
		}
	}
	resources, err := m.Resources(r.Context())
	if err != nil {
		return nil, err
	}
	data := struct {
		pageBase
		Resources       []*Resource
		Slots           []*Slot
		Resource        int64
		Day, Prev, Next string
	}{m.base(r, v), resources, slots, resource, from.Format("2006-01-02"),
		from.AddDate(0, 0, -1).Format("2006-01-02"), from.AddDate(0, 0, 1).Format("2006-01-02")}
	return m.render("slots", v.Zh("预约时段", "Slots"), "/reservation/slots", data)
}

func (m *Module[TTx]) pageReservations(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	q := r.URL.Query()
	f := ReservationFilter{State: State(q.Get("state")), CategoryID: q.Get("category"), UserID: q.Get("user"),
		DeadLetters: q.Get("dead") == "1", Limit: pageSize + 1}
	if !f.State.Valid() {
		f.State = ""
	}
	f.SlotID, _ = strconv.ParseInt(q.Get("slot"), 10, 64)
	f.ResourceID, _ = strconv.ParseInt(q.Get("resource"), 10, 64)
	f.Before, _ = strconv.ParseInt(q.Get("before"), 10, 64)
	list, err := m.Reservations(r.Context(), f)
	if err != nil {
		return nil, err
	}
	cats, err := m.Categories(r.Context())
	if err != nil {
		return nil, err
	}
	next := ""
	if len(list) > pageSize {
		list = list[:pageSize]
		nq := url.Values{}
		for k, vs := range q {
			nq[k] = vs
		}
		nq.Set("before", strconv.FormatInt(list[pageSize-1].ID, 10))
		nq.Del("flash")
		nq.Del("err")
		next = "/reservation/reservations?" + nq.Encode()
	}
	data := struct {
		pageBase
		Filter       ReservationFilter
		Categories   []*Category
		Reservations []*Reservation
		Next         string
		Paged        bool
	}{m.base(r, v), f, cats, list, next, f.Before != 0}
	return m.render("reservations", v.Zh("预约记录", "Reservations"), "/reservation/reservations", data)
}

func (m *Module[TTx]) pageReservation(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	id, err := pathInt(r, "id")
	if err != nil {
		return nil, err
	}
	d, err := m.detail(r, id)
	if err != nil {
		return nil, err
	}
	now := m.now()
	res := d.Reservation
	data := struct {
		pageBase
		*ReservationDetail
		CanCheckIn, CanCancel, CanRestore bool
	}{m.base(r, v), d,
		res.State == StatePaid || res.State == StateRestored,
		res.State == StatePaid || res.State == StatePendingPayment,
		res.State == StateReleased && res.AppealUntil != nil && !res.AppealUntil.Before(now)}
	return m.render("reservation", v.Zh("预约", "Reservation")+" #"+strconv.FormatInt(id, 10), "/reservation/reservations", data)
}

func (m *Module[TTx]) pageReservationAction(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	id, err := pathInt(r, "id")
	if err != nil {
		return nil, err
	}
	r = withActor(r, v)
	reason := r.PostFormValue("reason")
	back := "/reservation/reservations/" + strconv.FormatInt(id, 10)
	switch r.PathValue("action") {
	case "checkin":
		_, err = m.CheckIn(r.Context(), id, 0, reason)
	case "cancel":
		_, err = m.Cancel(r.Context(), id, 0, reason)
	case "restore":
		if err = checkReason(reason, true); err == nil {
			_, err = m.Restore(r.Context(), id, 0, reason)
		}
	default:
		return nil, module.Errorf(http.StatusNotFound, "not_found", "no such action")
	}
	return m.done(w, r, v, back, err)
}

func (m *Module[TTx]) pageCategories(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	cats, err := m.Categories(r.Context())
	if err != nil {
		return nil, err
	}
	pol, err := m.Policy(r.Context())
	if err != nil {
		return nil, err
	}
	user := strings.TrimSpace(r.URL.Query().Get("user"))
	var rec *NoShowRecord
	if validUser(user) == nil {
		if rec, err = m.NoShows(r.Context(), user); err != nil {
			return nil, err
		}
	}
	data := struct {
		pageBase
		Categories []*Category
		Policy     *Policy
		User       string
		Record     *NoShowRecord
	}{m.base(r, v), cats, pol, user, rec}
	return m.render("categories", v.Zh("释放设置", "Release settings"), "/reservation/categories", data)
}

func (m *Module[TTx]) pageCategorySave(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	r = withActor(r, v)
	id := r.PathValue("id")
	ints := formInts(r, "version", "grace_minutes", "reminder_minutes", "appeal_minutes", "hold_minutes")
	s := CategorySettings{NameZH: r.PostFormValue("name_zh"), NameEN: r.PostFormValue("name_en"),
		GraceMinutes: ints["grace_minutes"], ReminderMinutes: ints["reminder_minutes"],
		AppealMinutes: ints["appeal_minutes"], HoldMinutes: ints["hold_minutes"],
		ReleaseMode: Mode(r.PostFormValue("release_mode"))}
	reason := r.PostFormValue("reason")
	bands, err := ParseBands(r.PostFormValue("bands"))
	if err != nil {
		err = module.Invalid("bands: %v", err)
	} else if err = checkReason(reason, true); err == nil {
		s.Bands = bands
		_, err = m.UpdateCategory(r.Context(), id, int64(ints["version"]), s, reason)
	}
	return m.done(w, r, v, "/reservation/categories", err)
}

func (m *Module[TTx]) pagePolicySave(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	r = withActor(r, v)
	ints := formInts(r, "version", "threshold", "window_days", "restrict_days")
	reason := r.PostFormValue("reason")
	err := checkReason(reason, true)
	if err == nil {
		_, err = m.SetPolicy(r.Context(), Policy{Enabled: r.PostFormValue("enabled") == "1", Threshold: ints["threshold"],
			WindowDays: ints["window_days"], RestrictDays: ints["restrict_days"], Version: int64(ints["version"])}, reason)
	}
	return m.done(w, r, v, "/reservation/categories", err)
}

func (m *Module[TTx]) pageUserAction(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	r = withActor(r, v)
	user, reason := r.PostFormValue("user"), r.PostFormValue("reason")
	back := "/reservation/categories?user=" + url.QueryEscape(user)
	err := validUser(user)
	if err == nil {
		err = checkReason(reason, true)
	}
	if err == nil {
		switch r.PathValue("action") {
		case "reset":
			err = m.ResetNoShows(r.Context(), user, reason)
		case "lift":
			err = m.LiftRestriction(r.Context(), user, reason)
		default:
			return nil, module.Errorf(http.StatusNotFound, "not_found", "no such action")
		}
	}
	return m.done(w, r, v, back, err)
}

func (m *Module[TTx]) pageRuns(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	q := r.URL.Query()
	kind := q.Get("kind")
	if kind != "scan" && kind != "compensation" {
		kind = ""
	}
	before, _ := strconv.ParseInt(q.Get("before"), 10, 64)
	runs, err := m.Runs(r.Context(), kind, before, pageSize+1)
	if err != nil {
		return nil, err
	}
	next := ""
	if len(runs) > pageSize {
		runs = runs[:pageSize]
		next = "/reservation/runs?" + url.Values{"kind": {kind}, "before": {strconv.FormatInt(runs[pageSize-1].ID, 10)}}.Encode()
	}
	dead, err := m.Reservations(r.Context(), ReservationFilter{DeadLetters: true, Limit: pageSize})
	if err != nil {
		return nil, err
	}
	// The full reconciliation reads every slot and reservation: only on
	// request. The backlog and dead letters are index reads.
	inv := &InvariantReport{}
	checked := q.Get("check") == "1"
	if checked {
		inv, err = m.invariant(r)
	} else if inv.Due, err = m.DueCount(r.Context()); err == nil {
		if inv.DueDryRun, err = m.DueDryRunCount(r.Context()); err == nil {
			inv.DeadLetters, err = m.DeadLetterCount(r.Context())
		}
	}
	if err != nil {
		return nil, err
	}
	data := struct {
		pageBase
		Kind        string
		Runs        []*Run
		Next        string
		DeadLetters []*Reservation
		Invariant   *InvariantReport
		Checked     bool
	}{m.base(r, v), kind, runs, next, dead, inv, checked}
	return m.render("runs", v.Zh("释放任务", "Release runs"), "/reservation/runs", data)
}

func (m *Module[TTx]) pageRunNow(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	r = withActor(r, v)
	reason := r.PostFormValue("reason")
	err := checkReason(reason, true)
	if err == nil {
		_, err = m.ScanNow(r.Context(), reason)
	}
	return m.done(w, r, v, "/reservation/runs", err)
}

func (m *Module[TTx]) pageRequeue(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	id, err := pathInt(r, "id")
	if err != nil {
		return nil, err
	}
	r = withActor(r, v)
	reason := r.PostFormValue("reason")
	if err = checkReason(reason, true); err == nil {
		err = m.RequeueDeadLetter(r.Context(), id, reason)
	}
	return m.done(w, r, v, "/reservation/runs", err)
}

func (m *Module[TTx]) pageRepair(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	r = withActor(r, v)
	reason := r.PostFormValue("reason")
	err := checkReason(reason, true)
	if err == nil {
		_, err = m.RepairDrift(r.Context(), reason)
	}
	return m.done(w, r, v, "/reservation/runs", err)
}

// done redirects after a form post: back where the form said (or def),
// with the outcome in words.
func (m *Module[TTx]) done(w http.ResponseWriter, r *http.Request, v *module.View, def string, err error) (*module.Rendered, error) {
	target := safeBack(r.PostFormValue("back"), def)
	sep := "?"
	if strings.Contains(target, "?") {
		sep = "&"
	}
	if err != nil {
		target += sep + "err=" + url.QueryEscape(problemText(v, err))
	} else {
		target += sep + "flash=" + url.QueryEscape(v.Zh("已完成", "Done"))
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
	return nil, nil
}

// safeBack accepts only a path of this console (never another host) and
// drops an earlier outcome message.
func safeBack(back, def string) string {
	if !strings.HasPrefix(back, "/") || strings.HasPrefix(back, "//") || strings.ContainsAny(back, "\\\r\n") {
		return def
	}
	u, err := url.Parse(back)
	if err != nil || u.Host != "" || u.Scheme != "" {
		return def
	}
	q := u.Query()
	q.Del("flash")
	q.Del("err")
	u.RawQuery = q.Encode()
	return u.String()
}

// withActor names the console user on the request's context for audits
// (the console may already have done so).
func withActor(r *http.Request, v *module.View) *http.Request {
	if v.Actor == "" {
		return r
	}
	return r.WithContext(keel.WithActor(r.Context(), v.Actor))
}

// formInts reads integer form fields (missing or bad: 0, which validation
// then refuses with the field's name).
func formInts(r *http.Request, names ...string) map[string]int {
	out := make(map[string]int, len(names))
	for _, n := range names {
		out[n], _ = strconv.Atoi(strings.TrimSpace(r.PostFormValue(n)))
	}
	return out
}
