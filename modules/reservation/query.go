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
	rows, err := m.db.Query(ctx, m.sql("ReservationList"), string(f.State), f.SlotID, f.ResourceID, f.CategoryID,
		f.UserID, f.DeadLetters, f.Before, f.Limit)
	list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (*Reservation, error) { return scanReservation(r) })
	return list, wrapf(err, "listing reservations")
}

// Runs lists run records newest first (kind "" for both kinds).
func (m *Module[TTx]) Runs(ctx context.Context, kind string, before int64, limit int) ([]*Run, error) {
	if limit <= 0 || limit > maxList {
		limit = 50
	}
	rows, err := m.db.Query(ctx, m.sql("RunList"), kind, before, limit)
	list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (*Run, error) {
		x := &Run{}
		return x, r.Scan(&x.ID, &x.Kind, &x.Instance, &x.StartedAt, &x.FinishedAt, &x.Scanned, &x.Released, &x.Failed,
			&x.RestoreOK, &x.RestoreFailed, &x.Promoted, &x.HoldsExpired, &x.DryRun, &x.DeadLettered, &x.FirstID,
			&x.LastID, &x.Errors)
	})
	return list, wrapf(err, "listing runs")
}

// CheckInvariant returns the slots (all when slot is 0) whose held count
// differs from the reservations holding them. Empty means capacity is
// exact.
func (m *Module[TTx]) CheckInvariant(ctx context.Context, slot int64) ([]SlotDrift, error) {
	rows, err := m.db.Query(ctx, m.sql("SlotDrift"), slot, maxList)
	list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (SlotDrift, error) {
		var d SlotDrift
		return d, r.Scan(&d.SlotID, &d.Held, &d.Holding)
	})
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
		err := m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
			var held int
			if err := tx.QueryRow(ctx, m.sql("SlotRepair"), d.SlotID, m.now()).Scan(&held); err != nil {
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
	var n int
	err := m.db.QueryRow(ctx, m.sql("DoubleReleases")).Scan(&n)
	return n, wrapf(err, "counting double releases")
}

// DueCount is how many paid, never-failed reservations are past their
// release point now (the scan's backlog).
func (m *Module[TTx]) DueCount(ctx context.Context) (int, error) {
	var n int
	err := m.db.QueryRow(ctx, m.sql("DueCount"), m.now()).Scan(&n)
	return n, wrapf(err, "counting due reservations")
}

// DueDryRunCount is how many of DueCount are in dry-run categories (the
// gray switch): a run records them and releases none, so they stay due.
func (m *Module[TTx]) DueDryRunCount(ctx context.Context) (int, error) {
	var n int
	err := m.db.QueryRow(ctx, m.sql("DueCountDryRun"), m.now()).Scan(&n)
	return n, wrapf(err, "counting due reservations in dry-run categories")
}

// StateCounts counts reservations per state.
func (m *Module[TTx]) StateCounts(ctx context.Context) (map[State]int, error) {
	rows, err := m.db.Query(ctx, m.sql("StateCounts"))
	type sc struct {
		s State
		n int
	}
	list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (sc, error) {
		var x sc
		var s string
		err := r.Scan(&s, &x.n)
		x.s = State(s)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("counting reservations: %w", err)
	}
	out := make(map[State]int, len(list))
	for _, x := range list {
		out[x.s] = x.n
	}
	return out, nil
}
