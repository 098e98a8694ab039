package reservation

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
)

// CheckIn records the user's arrival (paid or restored → checked_in). It
// holds the row, so it and a release never both succeed: checked in first,
// the release's claim no longer matches; released first, this refuses (the
// user may appeal).
func (m *Module[TTx]) CheckIn(ctx context.Context, id, version int64, reason string) (*Reservation, error) {
	now, actor := m.now(), keel.ActorFrom(ctx)
	err := m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		r, err := m.lock(ctx, tx, id, version, "paid or restored", StatePaid, StateRestored)
		if err != nil {
			return err
		}
		v, err := m.st.markCheckedIn(ctx, tx, id, r.Version, now)
		if err != nil {
			return fmt.Errorf("checking in: %w", err)
		}
		return m.history(ctx, tx, id, r.State, StateCheckedIn, v, actor, orDefault(reason, "checked in"), now)
	})
	if err != nil {
		return nil, wrapf(err, "checking in reservation %d", id)
	}
	return m.Reservation(ctx, id)
}

// Cancel cancels a paid or pending reservation: its place returns to the
// slot (offered to the waitlist first) in the same transaction.
func (m *Module[TTx]) Cancel(ctx context.Context, id, version int64, reason string) (*Reservation, error) {
	now, actor := m.now(), keel.ActorFrom(ctx)
	err := m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		r, err := m.lock(ctx, tx, id, version, "paid or pending_payment", StatePaid, StatePendingPayment)
		if err != nil {
			return err
		}
		v, err := m.st.markCancelled(ctx, tx, id, r.Version, now)
		if err != nil {
			return fmt.Errorf("cancelling: %w", err)
		}
		if err := m.history(ctx, tx, id, r.State, StateCancelled, v, actor, orDefault(reason, "cancelled"), now); err != nil {
			return err
		}
		return m.freeOne(ctx, tx, &pass{now: now, actor: actor}, r)
	})
	if err != nil {
		return nil, wrapf(err, "cancelling reservation %d", id)
	}
	return m.Reservation(ctx, id)
}

// freeOne returns one reservation's place, offers it to the waitlist and
// writes the availability event.
func (m *Module[TTx]) freeOne(ctx context.Context, tx keelsql.Tx[TTx], p *pass, r *Reservation) error {
	out := &txOutcome{}
	slots, _, err := m.freeSlots(ctx, tx, p.now, []Candidate{{ID: r.ID, SlotID: r.SlotID, UserID: r.UserID}}, out)
	if err != nil {
		return err
	}
	if len(out.failed) > 0 {
		return out.failed[0].err
	}
	rows, promoted, err := m.promoteAll(ctx, tx, p, slots)
	if err != nil {
		return err
	}
	m.met.promotions.Add(float64(promoted))
	rows = append(rows, availabilityRow(sortedSlots(slots), p.now))
	return m.writeOutbox(ctx, tx, p.now, rows)
}

// Restore is the appeal: a released reservation whose appeal window is
// still open gets its place back, if the slot still has one, and its
// no-show is voided. Audited.
func (m *Module[TTx]) Restore(ctx context.Context, id, version int64, reason string) (*Reservation, error) {
	client, err := m.engine()
	if err != nil {
		return nil, err
	}
	now, actor := m.now(), keel.ActorFrom(ctx)
	err = m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		r, err := m.lock(ctx, tx, id, version, "released", StateReleased)
		if err != nil {
			return err
		}
		if r.AppealUntil == nil || r.AppealUntil.Before(now) {
			return errAppealClosed
		}
		s, err := m.takePlace(ctx, tx, r.SlotID, now)
		if err != nil {
			if err == errSlotFull || err == errSlotOver {
				return errSlotGone
			}
			return err
		}
		v, err := m.st.markRestored(ctx, tx, id, r.Version, now)
		if err != nil {
			return fmt.Errorf("restoring: %w", err)
		}
		if err := m.history(ctx, tx, id, StateReleased, StateRestored, v, actor, orDefault(reason, "appeal"), now); err != nil {
			return err
		}
		if err := m.st.voidReservationNoShow(ctx, tx, id, now, actor, "restored on appeal"); err != nil {
			return fmt.Errorf("voiding the no-show: %w", err)
		}
		if err := client.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "reservation.restore",
			Target: fmt.Sprintf("reservation:%d", id), Reason: reason}); err != nil {
			return err
		}
		return m.writeOutbox(ctx, tx, now, []outboxRow{
			{kind: kindRestore, reservationID: id, version: v, slotID: r.SlotID, userID: r.UserID, payload: map[string]any{}},
			availabilityRow([]*slotState{s}, now)})
	})
	if err != nil {
		return nil, wrapf(err, "restoring reservation %d", id)
	}
	return m.Reservation(ctx, id)
}

// Move moves a paid reservation to another slot: a new release point, a new
// version, so the old precise job and reminder find a stale version and do
// nothing while new ones are queued; the old place is freed.
func (m *Module[TTx]) Move(ctx context.Context, id, version, slot int64, reason string) (*Reservation, error) {
	client, err := m.engine()
	if err != nil {
		return nil, err
	}
	now, actor := m.now(), keel.ActorFrom(ctx)
	err = m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		r, err := m.lock(ctx, tx, id, version, "paid", StatePaid)
		if err != nil {
			return err
		}
		if r.SlotID == slot {
			return module.Invalid("slot_id: the reservation is already in slot %d", slot)
		}
		return m.moveTx(ctx, client, tx, r, slot, &pass{now: now, actor: actor}, reason)
	})
	if err != nil {
		return nil, wrapf(err, "moving reservation %d", id)
	}
	return m.Reservation(ctx, id)
}

func (m *Module[TTx]) moveTx(ctx context.Context, client *keel.Client[TTx], tx keelsql.Tx[TTx], r *Reservation, slot int64, p *pass, reason string) error {
	ids := []int64{r.SlotID, slot}
	slices.Sort(ids) // one lock order for two moves between the same slots
	if err := m.st.lockSlots(ctx, tx, ids); err != nil {
		return fmt.Errorf("locking slots: %w", err)
	}
	target, err := m.st.slot(ctx, tx, slot)
	if err != nil {
		return err
	}
	cat, err := m.st.category(ctx, tx, target.CategoryID)
	if err != nil {
		return err
	}
	taken, err := m.takePlace(ctx, tx, slot, p.now)
	if err != nil {
		return err
	}
	grace := graceFor(cat, target.StartsAt, m.set.zone)
	due := target.StartsAt.Add(time.Duration(grace) * time.Minute)
	v, err := m.st.moveReservation(ctx, tx, r.ID, r.Version, slot, grace, due, p.now)
	if err != nil {
		return fmt.Errorf("moving: %w", err)
	}
	why := fmt.Sprintf("moved from slot %d to slot %d", r.SlotID, slot)
	if reason != "" {
		why += ": " + reason
	}
	if err := m.history(ctx, tx, r.ID, StatePaid, StatePaid, v, p.actor, why, p.now); err != nil {
		return err
	}
	if err := m.freeOne(ctx, tx, p, r); err != nil {
		return err
	}
	if err := m.writeOutbox(ctx, tx, p.now, []outboxRow{availabilityRow([]*slotState{taken}, p.now)}); err != nil {
		return err
	}
	moved := *r
	moved.SlotID, moved.StartsAt = slot, target.StartsAt
	return m.schedule(ctx, client, tx, &moved, cat, v, due, p.now)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
