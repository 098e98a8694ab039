package reservation

import (
	"context"
	"time"

	"github.com/keelwork/keel/keelsql"
)

func scanResource(row scanner) (*Resource, error) {
	r := &Resource{}
	if err := row.Scan(&r.ID, &r.CategoryID, &r.Name, &r.Location, &r.CreatedAt); err != nil {
		return nil, notFound(err)
	}
	return r, nil
}

func scanSlot(row scanner) (*Slot, error) {
	s := &Slot{}
	if err := row.Scan(&s.ID, &s.ResourceID, &s.StartsAt, &s.EndsAt, &s.Capacity, &s.Held, &s.Waiting, &s.Version,
		&s.ResourceName, &s.CategoryID); err != nil {
		return nil, notFound(err)
	}
	s.Available = s.Capacity - s.Held
	utc(&s.StartsAt, &s.EndsAt)
	return s, nil
}

// insertResource adds a resource of a category.
func (s *store[TTx]) insertResource(ctx context.Context, tx keelsql.Querier, category, name, location string, now time.Time) (*Resource, error) {
	return scanResource(tx.QueryRow(ctx, s.sql("ResourceInsert"), category, name, location, now))
}

// resources lists up to limit resources.
func (s *store[TTx]) resources(ctx context.Context, limit int) ([]*Resource, error) {
	rows, err := s.db.Query(ctx, s.sql("ResourceList"), limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (*Resource, error) { return scanResource(r) })
}

// insertSlot adds a slot; keelsql.ErrNoRows when the resource already has
// one starting then.
func (s *store[TTx]) insertSlot(ctx context.Context, tx keelsql.Querier, resource int64, start, end time.Time, capacity int, now time.Time) (int64, error) {
	return one[int64](tx.QueryRow(ctx, s.sql("SlotInsert"), resource, start.UTC(), end.UTC(), capacity, now))
}

// slot reads one slot with its availability; keeltype.ErrNotFound when
// there is none.
func (s *store[TTx]) slot(ctx context.Context, q keelsql.Querier, id int64) (*Slot, error) {
	return scanSlot(q.QueryRow(ctx, s.sql("SlotGet"), id))
}

// slots lists slots overlapping [f.From, f.To).
func (s *store[TTx]) slots(ctx context.Context, f SlotFilter) ([]*Slot, error) {
	rows, err := s.db.Query(ctx, s.sql("SlotList"), f.ResourceID, f.From, f.To, f.Limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (*Slot, error) { return scanSlot(r) })
}

// takePlace takes one place of a slot that has one and has not ended;
// keelsql.ErrNoRows when it has none.
func (s *store[TTx]) takePlace(ctx context.Context, tx keelsql.Querier, slotID int64, now time.Time) (*slotState, error) {
	st := &slotState{ID: slotID}
	err := tx.QueryRow(ctx, s.sql("SlotTake"), slotID, now).Scan(&st.ID, &st.Capacity, &st.Held)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// takePlaceForWaitlist takes one place of a slot for a waitlist offer;
// keelsql.ErrNoRows when it has none.
func (s *store[TTx]) takePlaceForWaitlist(ctx context.Context, tx keelsql.Querier, slotID int64, now time.Time) error {
	_, err := one[int64](tx.QueryRow(ctx, s.sql("SlotTakeForWaitlist"), slotID, now))
	return err
}

// restoreSlots gives back one place per entry of perReservation (a slot id
// per freed reservation) and returns the slots that took them back.
func (s *store[TTx]) restoreSlots(ctx context.Context, tx keelsql.Querier, perReservation []int64, now time.Time) ([]*slotState, error) {
	rows, err := tx.Query(ctx, s.sql("SlotsRestore"), int64s(perReservation), now)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (*slotState, error) {
		st := &slotState{}
		return st, r.Scan(&st.ID, &st.Capacity, &st.Held, &st.Waiting, &st.EndsAt)
	})
}

// addWaiting counts n more users waiting for a slot.
func (s *store[TTx]) addWaiting(ctx context.Context, tx keelsql.Querier, slot int64, n int, now time.Time) error {
	_, err := tx.Exec(ctx, s.sql("SlotWaitingAdd"), slot, n, now)
	return err
}

// lockSlots holds the rows of the slots, in the order given (PostgreSQL:
// two transactions moving between the same slots lock them in one order;
// SQLite's single writer needs no lock).
func (s *store[TTx]) lockSlots(ctx context.Context, tx keelsql.Querier, ids []int64) error {
	if !s.pg {
		return nil
	}
	_, err := tx.Exec(ctx, s.sql("SlotLock"), int64s(ids))
	return err
}

// holdMinutes is how long a waitlist offer of the slot holds its place (its
// category's hold minutes).
func (s *store[TTx]) holdMinutes(ctx context.Context, tx keelsql.Querier, slot int64) (int, error) {
	return one[int](tx.QueryRow(ctx, s.sql("SlotHoldMinutes"), slot))
}

// slotDrift lists up to limit slots (all when slot is 0) whose held count
// differs from the reservations holding them.
func (s *store[TTx]) slotDrift(ctx context.Context, slot int64, limit int) ([]SlotDrift, error) {
	rows, err := s.db.Query(ctx, s.sql("SlotDrift"), slot, limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (SlotDrift, error) {
		var d SlotDrift
		return d, r.Scan(&d.SlotID, &d.Held, &d.Holding)
	})
}

// repairSlot sets a slot's held count to the reservations holding it and
// returns the new count.
func (s *store[TTx]) repairSlot(ctx context.Context, tx keelsql.Querier, slot int64, now time.Time) (int, error) {
	return one[int](tx.QueryRow(ctx, s.sql("SlotRepair"), slot, now))
}

// joinWaitlist adds a user to a slot's waitlist; keelsql.ErrNoRows when the
// user is waiting already.
func (s *store[TTx]) joinWaitlist(ctx context.Context, tx keelsql.Querier, slot int64, user string, now time.Time) (int64, error) {
	return one[int64](tx.QueryRow(ctx, s.sql("WaitlistInsert"), slot, user, now))
}

// waitlist lists up to limit entries of a slot's waitlist.
func (s *store[TTx]) waitlist(ctx context.Context, slot int64, limit int) ([]WaitlistEntry, error) {
	rows, err := s.db.Query(ctx, s.sql("WaitlistList"), slot, limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (WaitlistEntry, error) {
		var w WaitlistEntry
		return w, r.Scan(&w.ID, &w.SlotID, &w.UserID, &w.State, &w.ReservationID, &w.CreatedAt, &w.UpdatedAt)
	})
}

// nextWaiting returns the first n users waiting for a slot (id and user).
func (s *store[TTx]) nextWaiting(ctx context.Context, tx keelsql.Querier, slot int64, n int) ([]WaitlistEntry, error) {
	rows, err := tx.Query(ctx, s.sql("WaitlistNext"), slot, n)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (WaitlistEntry, error) {
		var w WaitlistEntry
		return w, r.Scan(&w.ID, &w.UserID)
	})
}

// markOffered records that a waitlist entry was offered reservation id.
func (s *store[TTx]) markOffered(ctx context.Context, tx keelsql.Querier, entry, reservation int64, now time.Time) error {
	_, err := tx.Exec(ctx, s.sql("WaitlistOffer"), entry, reservation, now)
	return err
}
