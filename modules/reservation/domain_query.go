package reservation

import (
	"context"
	"fmt"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
)

// ReservationFilter selects reservations; zero fields match everything.
type ReservationFilter struct {
	State      State
	SlotID     int64
	ResourceID int64
	CategoryID string
	UserID     string
	// DeadLetters keeps only paid reservations given up on.
	DeadLetters bool
	// Before pages: only ids below it (newest first).
	Before int64
	Limit  int
}

// Reservations lists reservations newest first.
func (m *Module[TTx]) Reservations(ctx context.Context, f ReservationFilter) ([]*Reservation, error) {
	if f.Limit <= 0 || f.Limit > maxList {
		f.Limit = 50
	}
	list, err := m.st.reservations(ctx, f)
	return list, wrapf(err, "listing reservations")
}

// Runs lists run records newest first (kind "" for both kinds).
func (m *Module[TTx]) Runs(ctx context.Context, kind string, before int64, limit int) ([]*Run, error) {
	if limit <= 0 || limit > maxList {
		limit = 50
	}
	list, err := m.st.runs(ctx, kind, before, limit)
	return list, wrapf(err, "listing runs")
}

// CheckInvariant returns the slots (all when slot is 0) whose held count
// differs from the reservations holding them. Empty means capacity is
// exact.
func (m *Module[TTx]) CheckInvariant(ctx context.Context, slot int64) ([]SlotDrift, error) {
	list, err := m.st.slotDrift(ctx, slot, maxList)
	return list, wrapf(err, "checking slot capacity")
}

// RepairDrift sets each drifted slot's held count to the reservations
// holding it, audited per slot, and returns what it changed.
func (m *Module[TTx]) RepairDrift(ctx context.Context, reason string) ([]SlotDrift, error) {
	client, err := m.engine()
	if err != nil {
		return nil, err
	}
	drifts, err := m.CheckInvariant(ctx, 0)
	if err != nil {
		return nil, err
	}
	var fixed []SlotDrift
	for _, d := range drifts {
		err := m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
			held, err := m.st.repairSlot(ctx, tx, d.SlotID, m.now())
			if err != nil {
				return err
			}
			fixed = append(fixed, SlotDrift{SlotID: d.SlotID, Held: d.Held, Holding: held})
			return client.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "reservation.capacity_repair",
				Target: fmt.Sprintf("slot:%d", d.SlotID), Reason: reason,
				Context: map[string]any{"held_before": d.Held, "held_after": held}})
		})
		if err != nil {
			return fixed, fmt.Errorf("repairing slot %d: %w", d.SlotID, err)
		}
	}
	return fixed, nil
}

// DoubleReleases counts reservations released more than once (history
// rows): the release is exactly-once, so anything but zero is a defect.
func (m *Module[TTx]) DoubleReleases(ctx context.Context) (int, error) {
	n, err := m.st.doubleReleases(ctx)
	return n, wrapf(err, "counting double releases")
}

// DueCount is how many paid, never-failed reservations are past their
// release point now (the scan's backlog).
func (m *Module[TTx]) DueCount(ctx context.Context) (int, error) {
	n, err := m.st.dueCount(ctx, m.now())
	return n, wrapf(err, "counting due reservations")
}

// DueDryRunCount is how many of DueCount are in dry-run categories (the
// gray switch): a run records them and releases none, so they stay due.
func (m *Module[TTx]) DueDryRunCount(ctx context.Context) (int, error) {
	n, err := m.st.dueDryRunCount(ctx, m.now())
	return n, wrapf(err, "counting due reservations in dry-run categories")
}

// StateCounts counts reservations per state.
func (m *Module[TTx]) StateCounts(ctx context.Context) (map[State]int, error) {
	out, err := m.st.stateCounts(ctx)
	if err != nil {
		return nil, fmt.Errorf("counting reservations: %w", err)
	}
	return out, nil
}
