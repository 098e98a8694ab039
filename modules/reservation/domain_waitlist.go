package reservation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelwork/keel/keelsql"
)

// WaitlistEntry is a user waiting for a place in a full slot.
type WaitlistEntry struct {
	ID            int64     `json:"id"`
	SlotID        int64     `json:"slot_id"`
	UserID        string    `json:"user_id"`
	State         string    `json:"state"`
	ReservationID int64     `json:"reservation_id,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// promote offers up to n freed places of slot s to its first waitlisted
// users, in the transaction that freed them: each offer is a new
// pending_payment reservation holding the place until the category's hold
// minutes pass (then it expires and the next user is offered). It returns
// the offer notifications and how many were promoted.
func (m *Module[TTx]) promote(ctx context.Context, tx keelsql.Tx[TTx], p *pass, s *slotState, n int) ([]outboxRow, int, error) {
	if s.Waiting == 0 || n <= 0 || !s.EndsAt.After(p.now) {
		return nil, 0, nil
	}
	next, err := m.st.nextWaiting(ctx, tx, s.ID, n)
	if err != nil || len(next) == 0 {
		return nil, 0, wrapf(err, "reading the waitlist of slot %d", s.ID)
	}
	minutes, err := m.st.holdMinutes(ctx, tx, s.ID)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the offer hold of slot %d: %w", s.ID, err)
	}
	hold := p.now.Add(time.Duration(minutes) * time.Minute)
	var out []outboxRow
	for _, w := range next {
		row, ok, err := m.offer(ctx, tx, p, s, w, hold)
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			break
		}
		out = append(out, row)
	}
	return out, len(out), nil
}

// offer gives one waitlisted user the place: false when the slot has none.
func (m *Module[TTx]) offer(ctx context.Context, tx keelsql.Tx[TTx], p *pass, s *slotState, w WaitlistEntry, hold time.Time) (outboxRow, bool, error) {
	err := m.st.takePlaceForWaitlist(ctx, tx, s.ID, p.now)
	if errors.Is(err, keelsql.ErrNoRows) {
		return outboxRow{}, false, nil
	}
	if err != nil {
		return outboxRow{}, false, fmt.Errorf("taking a place of slot %d for the waitlist: %w", s.ID, err)
	}
	id, version, _, err := m.st.insertReservation(ctx, tx, s.ID, w.UserID, hold, w.ID, p.now)
	if err != nil {
		return outboxRow{}, false, fmt.Errorf("offering slot %d to %s: %w", s.ID, w.UserID, err)
	}
	if err := m.st.markOffered(ctx, tx, w.ID, id, p.now); err != nil {
		return outboxRow{}, false, fmt.Errorf("marking waitlist entry %d offered: %w", w.ID, err)
	}
	if err := m.history(ctx, tx, id, "", StatePendingPayment, version, p.actor, "waitlist offer", p.now); err != nil {
		return outboxRow{}, false, err
	}
	s.Held++
	s.Waiting--
	return outboxRow{kind: kindOffer, reservationID: id, version: version, slotID: s.ID, userID: w.UserID,
		payload: map[string]any{"hold_expires_at": hold.Format(time.RFC3339)}}, true, nil
}

// history appends one state change.
func (m *Module[TTx]) history(ctx context.Context, q keelsql.Querier, id int64, from, to State, version int64, actor, reason string, at time.Time) error {
	if err := m.st.insertHistory(ctx, q, id, from, to, version, actor, reason, at); err != nil {
		return fmt.Errorf("recording history of reservation %d: %w", id, err)
	}
	return nil
}

// wrapf wraps err with context, or returns nil.
func wrapf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}
