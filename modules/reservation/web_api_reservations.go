package reservation

import (
	"net/http"

	"github.com/keelwork/keel/module"
)

// apiReservations: GET /reservations?state=&slot_id=&resource_id=&category=
// &user_id=&dead_letters=true&cursor=&limit=, newest first.
func (m *Module[TTx]) apiReservations(w http.ResponseWriter, r *http.Request) (int, any, error) {
	f, err := reservationFilter(r)
	if err != nil {
		return 0, nil, err
	}
	return m.reservationPage(r, f)
}

func (m *Module[TTx]) reservationPage(r *http.Request, f ReservationFilter) (int, any, error) {
	limit := f.Limit
	f.Limit++
	list, err := m.Reservations(r.Context(), f)
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

func reservationFilter(r *http.Request) (ReservationFilter, error) {
	q := newQuery(r, "state", "slot_id", "resource_id", "category", "user_id", "dead_letters", "after", "cursor", "limit")
	f := ReservationFilter{State: State(q.text("state", 40)), SlotID: q.id("slot_id"), ResourceID: q.id("resource_id"),
		CategoryID: q.text("category", 40), UserID: q.text("user_id", 100), DeadLetters: q.bool("dead_letters"),
		Before: q.cursor(), Limit: q.limit()}
	if f.State != "" && !f.State.Valid() {
		q.fail("state: one of pending_payment, paid, checked_in, released, restored, cancelled, expired")
	}
	return f, q.err
}

// apiReservation returns a reservation with its history and notifications.
func (m *Module[TTx]) apiReservation(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if err := knownParams(r); err != nil {
		return 0, nil, err
	}
	id, err := pathInt(r, "id")
	if err != nil {
		return 0, nil, err
	}
	d, err := m.detail(r, id)
	return http.StatusOK, d, err
}

// ReservationDetail is a reservation with everything that happened to it.
type ReservationDetail struct {
	Reservation   *Reservation   `json:"reservation"`
	History       []HistoryEntry `json:"history"`
	Notifications []Notification `json:"notifications"`
}

func (m *Module[TTx]) detail(r *http.Request, id int64) (*ReservationDetail, error) {
	res, err := m.Reservation(r.Context(), id)
	if err != nil {
		return nil, err
	}
	d := &ReservationDetail{Reservation: res}
	if d.History, err = m.History(r.Context(), id); err != nil {
		return nil, err
	}
	d.Notifications, err = m.Notifications(r.Context(), id)
	return d, err
}

func (m *Module[TTx]) apiBook(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var b struct {
		SlotID int64  `json:"slot_id"`
		UserID string `json:"user_id"`
	}
	if err := module.Decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	res, err := m.Book(r.Context(), b.SlotID, b.UserID)
	return http.StatusCreated, res, err
}

// transitionBody is the body of reservation actions: the version the caller
// saw (0: whatever it is now) and an optional reason.
type transitionBody struct {
	Version int64  `json:"version"`
	Reason  string `json:"reason"`
}

// transition decodes a transition body and runs act.
func (m *Module[TTx]) transition(w http.ResponseWriter, r *http.Request, reasonRequired bool,
	act func(id, version int64, reason string) (*Reservation, error)) (int, any, error) {
	id, err := pathInt(r, "id")
	if err != nil {
		return 0, nil, err
	}
	var b transitionBody
	if err := module.Decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	if err := checkReason(b.Reason, reasonRequired); err != nil {
		return 0, nil, err
	}
	if b.Version < 0 {
		return 0, nil, module.Invalid("version: not negative")
	}
	res, err := act(id, b.Version, b.Reason)
	return http.StatusOK, res, err
}

func (m *Module[TTx]) apiPay(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return m.transition(w, r, false, func(id, v int64, _ string) (*Reservation, error) { return m.Pay(r.Context(), id, v) })
}

func (m *Module[TTx]) apiCheckIn(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return m.transition(w, r, false, func(id, v int64, why string) (*Reservation, error) { return m.CheckIn(r.Context(), id, v, why) })
}

func (m *Module[TTx]) apiCancel(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return m.transition(w, r, false, func(id, v int64, why string) (*Reservation, error) { return m.Cancel(r.Context(), id, v, why) })
}

func (m *Module[TTx]) apiRestore(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return m.transition(w, r, true, func(id, v int64, why string) (*Reservation, error) { return m.Restore(r.Context(), id, v, why) })
}

func (m *Module[TTx]) apiMove(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathInt(r, "id")
	if err != nil {
		return 0, nil, err
	}
	var b struct {
		SlotID  int64  `json:"slot_id"`
		Version int64  `json:"version"`
		Reason  string `json:"reason"`
	}
	if err := module.Decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	if err := checkReason(b.Reason, false); err != nil {
		return 0, nil, err
	}
	res, err := m.Move(r.Context(), id, b.Version, b.SlotID, b.Reason)
	return http.StatusOK, res, err
}
