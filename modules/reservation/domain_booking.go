package reservation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module/web"
)

func validUser(user string) error {
	t, err := web.Name("user_id", user, 100)
	if err == nil && t != user {
		err = web.Invalid("user_id must not start or end with spaces")
	}
	return err
}

// Book takes a place of a slot for a user: a pending_payment reservation
// holding it for reservation.payment_minutes. A user restricted by the
// no-show policy is refused; a full slot is refused (join its waitlist).
func (m *Module[TTx]) Book(ctx context.Context, slot int64, user string) (*Reservation, error) {
	if err := validUser(user); err != nil {
		return nil, err
	}
	now, actor := m.now(), keel.ActorFrom(ctx)
	var id int64
	err := m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		if err := m.checkRestriction(ctx, tx, user, now); err != nil {
			return err
		}
		s, err := m.takePlace(ctx, tx, slot, now)
		if err != nil {
			return err
		}
		hold := now.Add(time.Duration(m.set.paymentMinutes) * time.Minute)
		var version int64
		if id, version, _, err = m.st.insertReservation(ctx, tx, slot, user, hold, 0, now); err != nil {
			return fmt.Errorf("inserting the reservation: %w", err)
		}
		if err := m.history(ctx, tx, id, "", StatePendingPayment, version, actor, "booked", now); err != nil {
			return err
		}
		return m.writeOutbox(ctx, tx, now, []outboxRow{availabilityRow([]*slotState{s}, now)})
	})
	if err != nil {
		return nil, wrapf(err, "booking slot %d for %s", slot, user)
	}
	return m.Reservation(ctx, id)
}

func (m *Module[TTx]) checkRestriction(ctx context.Context, q keelsql.Querier, user string, now time.Time) error {
	r, err := m.activeRestriction(ctx, q, user, now)
	if err != nil {
		return err
	}
	if r != nil {
		return restrictedError(user, r)
	}
	return nil
}

// JoinWaitlist puts a user on a full slot's waitlist; the first freed place
// (release, cancel, lapsed hold) is offered to the first user waiting.
func (m *Module[TTx]) JoinWaitlist(ctx context.Context, slot int64, user string) (*WaitlistEntry, error) {
	if err := validUser(user); err != nil {
		return nil, err
	}
	now := m.now()
	var id int64
	err := m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		if err := m.checkRestriction(ctx, tx, user, now); err != nil {
			return err
		}
		s, err := m.st.slot(ctx, tx, slot)
		if err != nil {
			return err
		}
		if !s.EndsAt.After(now) {
			return errSlotOver
		}
		id, err = m.st.joinWaitlist(ctx, tx, slot, user, now)
		if errors.Is(err, keelsql.ErrNoRows) {
			return errAlreadyWaiting
		}
		if err != nil {
			return err
		}
		return m.st.addWaiting(ctx, tx, slot, 1, now)
	})
	if err != nil {
		return nil, wrapf(err, "adding %s to the waitlist of slot %d", user, slot)
	}
	list, err := m.Waitlist(ctx, slot)
	if err != nil {
		return nil, err
	}
	for i := range list {
		if list[i].ID == id {
			return &list[i], nil
		}
	}
	return nil, fmt.Errorf("waitlist entry %d vanished", id)
}

// Pay records the payment of a pending booking (or waitlist offer) and
// fixes its release point: start plus the category's grace (of the time
// band containing the start, in the business zone). In the same
// transaction it queues the precise release job at that point (idempotency
// key reservation+version) and the reminder before it.
func (m *Module[TTx]) Pay(ctx context.Context, id, version int64) (*Reservation, error) {
	client, err := m.engine()
	if err != nil {
		return nil, err
	}
	now, actor := m.now(), keel.ActorFrom(ctx)
	err = m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		r, err := m.lock(ctx, tx, id, version, "pending_payment", StatePendingPayment)
		if err != nil {
			return err
		}
		if r.HoldExpiresAt != nil && !r.HoldExpiresAt.After(now) {
			return errHoldLapsed
		}
		if !r.EndsAt.After(now) {
			return errSlotOver
		}
		cat, err := m.st.category(ctx, tx, r.CategoryID)
		if err != nil {
			return err
		}
		grace := graceFor(cat, r.StartsAt, m.set.zone)
		due := r.StartsAt.Add(time.Duration(grace) * time.Minute)
		v, err := m.st.markPaid(ctx, tx, id, r.Version, now, grace, due)
		if err != nil {
			return fmt.Errorf("marking paid: %w", err)
		}
		if err := m.history(ctx, tx, id, StatePendingPayment, StatePaid, v, actor, "paid", now); err != nil {
			return err
		}
		return m.schedule(ctx, client, tx, r, cat, v, due, now)
	})
	if err != nil {
		return nil, wrapf(err, "paying reservation %d", id)
	}
	return m.Reservation(ctx, id)
}

// schedule queues, in tx, the precise release job of a paid reservation at
// version v and its reminder (cat.ReminderMinutes before the release point,
// or at once when less remains; none once the point has passed).
func (m *Module[TTx]) schedule(ctx context.Context, client *keel.Client[TTx], tx keelsql.Tx[TTx], r *Reservation, cat *Category, v int64, due, now time.Time) error {
	_, err := client.InsertTx(ctx, tx.Native(), ReleaseArgs{ReservationID: r.ID, Version: v}, &keel.InsertOpts{
		Queue: m.set.queue, RunAt: due, IdempotencyKey: fmt.Sprintf("release:%d:%d", r.ID, v), MaxAttempts: releaseMaxAttempts})
	if err != nil {
		return fmt.Errorf("scheduling the release of %d: %w", r.ID, err)
	}
	if cat.ReminderMinutes == 0 || !due.After(now) {
		return nil
	}
	at := due.Add(-time.Duration(cat.ReminderMinutes) * time.Minute)
	if at.Before(now) {
		at = now
	}
	return m.writeOutbox(ctx, tx, now, []outboxRow{{kind: kindReminder, reservationID: r.ID, version: v,
		slotID: r.SlotID, userID: r.UserID, deliverAt: at, payload: map[string]any{
			"release_at": due.Format(time.RFC3339), "starts_at": r.StartsAt.UTC().Format(time.RFC3339)}}})
}

// lock reads a reservation holding its row for the rest of tx, the first
// step of every transition: a non-zero version must match, and the state
// must be one of states (want names them in the refusal), checked on the
// held row so no other transition can move it in between.
func (m *Module[TTx]) lock(ctx context.Context, tx keelsql.Tx[TTx], id, version int64, want string, states ...State) (*Reservation, error) {
	r, err := m.st.lockReservation(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	if version != 0 && r.Version != version {
		return nil, versionError(id, r.Version, version)
	}
	if !slices.Contains(states, r.State) {
		return nil, stateError(id, r.State, r.Version, want)
	}
	return r, nil
}

// Reservation returns one reservation.
func (m *Module[TTx]) Reservation(ctx context.Context, id int64) (*Reservation, error) {
	r, err := m.st.reservation(ctx, m.st.db, id)
	return r, wrapf(err, "reading reservation %d", id)
}

// History returns a reservation's state changes, oldest first.
func (m *Module[TTx]) History(ctx context.Context, id int64) ([]HistoryEntry, error) {
	list, err := m.st.history(ctx, id)
	return list, wrapf(err, "reading the history of reservation %d", id)
}

// Notifications returns a reservation's notifications with their delivery
// state, oldest first.
func (m *Module[TTx]) Notifications(ctx context.Context, id int64) ([]Notification, error) {
	list, err := m.st.notifications(ctx, id)
	return list, wrapf(err, "reading the notifications of reservation %d", id)
}
