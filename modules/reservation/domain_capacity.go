package reservation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/keelwork/keel/keelsql"
)

// slotState is a slot after capacity came back to it.
type slotState struct {
	ID       int64
	Capacity int
	Held     int
	Waiting  int
	EndsAt   time.Time
	// Freed is how many places this transaction returned.
	Freed int
}

// returnCapacity gives back one place per entry of perReservation (a slot
// id per freed reservation) and returns the slots that took them back. A
// slot that holds fewer places than it is asked to return is missing from
// the result: its reservations must not be freed.
func (m *Module[TTx]) returnCapacity(ctx context.Context, tx keelsql.Querier, now time.Time, perReservation []int64) (map[int64]*slotState, error) {
	unique := slices.Clone(perReservation)
	slices.Sort(unique)
	unique = slices.Compact(unique)
	list, err := m.st.restoreSlots(ctx, tx, perReservation, now)
	if err != nil {
		return nil, fmt.Errorf("returning capacity to %d slots: %w", len(unique), err)
	}
	out := make(map[int64]*slotState, len(list))
	for _, s := range list {
		out[s.ID] = s
	}
	for _, id := range perReservation {
		if s, ok := out[id]; ok {
			s.Freed++
		}
	}
	return out, nil
}

// takePlace takes one place of a slot for a booking, a restore or a move.
func (m *Module[TTx]) takePlace(ctx context.Context, tx keelsql.Querier, slotID int64, now time.Time) (*slotState, error) {
	s, err := m.st.takePlace(ctx, tx, slotID, now)
	if errors.Is(err, keelsql.ErrNoRows) {
		return nil, m.whyNoPlace(ctx, tx, slotID, now)
	}
	if err != nil {
		return nil, fmt.Errorf("taking a place of slot %d: %w", slotID, err)
	}
	return s, nil
}

// whyNoPlace tells why a slot gave no place: missing, ended or full.
func (m *Module[TTx]) whyNoPlace(ctx context.Context, tx keelsql.Querier, slotID int64, now time.Time) error {
	s, err := m.st.slot(ctx, tx, slotID)
	switch {
	case err != nil:
		return err
	case !s.EndsAt.After(now):
		return errSlotOver
	}
	return errSlotFull
}
