package reservation

import (
	"context"
	"time"

	"github.com/keelwork/keel/keelsql"
)

func scanCandidates(rows keelsql.Rows, err error) ([]Candidate, error) {
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Candidate, error) {
		var c Candidate
		err := r.Scan(&c.ID, &c.SlotID, &c.UserID, &c.CategoryID, &c.Version, &c.Due)
		return c, err
	})
}

// claimDue claims, holding their rows, up to n paid reservations of a
// category due by now, after the (due, id) where the previous claim ended.
// On PostgreSQL the statement also sets the transaction's
// synchronous_commit to commitMode.
func (s *store[TTx]) claimDue(ctx context.Context, tx keelsql.Querier, category string, now time.Time, n int, after Candidate, commitMode string) ([]Candidate, error) {
	args := []any{category, now, n, after.Due, after.ID}
	if s.pg {
		args = append(args, commitMode)
	}
	rows, err := tx.Query(ctx, s.sql("ClaimDue"), args...)
	return scanCandidates(rows, err)
}

// claimDueSlot claims up to n due reservations of one slot.
func (s *store[TTx]) claimDueSlot(ctx context.Context, tx keelsql.Querier, slot int64, now time.Time, n int) ([]Candidate, error) {
	rows, err := tx.Query(ctx, s.sql("ClaimDueSlot"), slot, now, n)
	return scanCandidates(rows, err)
}

// claimOne claims one reservation at its version if it is still paid and
// due (failedBefore: among those that failed before).
func (s *store[TTx]) claimOne(ctx context.Context, tx keelsql.Querier, c Candidate, now time.Time, failedBefore bool) ([]Candidate, error) {
	rows, err := tx.Query(ctx, s.sql("ClaimOne"), c.ID, c.Version, now, failedBefore)
	return scanCandidates(rows, err)
}

// dueDryRun lists up to limit due reservations of a category, claiming none.
func (s *store[TTx]) dueDryRun(ctx context.Context, category string, now time.Time, limit int) ([]Candidate, error) {
	rows, err := s.db.Query(ctx, s.sql("DueDryRun"), category, now, limit)
	return scanCandidates(rows, err)
}

// claimHolds claims up to n pending_payment reservations whose hold lapsed.
func (s *store[TTx]) claimHolds(ctx context.Context, tx keelsql.Querier, now time.Time, n int) ([]Candidate, error) {
	rows, err := tx.Query(ctx, s.sql("ClaimHolds"), now, n)
	return scanCandidates(rows, err)
}

// expired is a reservation moved to expired: its new version and whether
// it was a waitlist offer.
type expired struct {
	id, version int64
	offer       bool
}

// expireMany moves held reservations (ids at versions) to expired.
func (s *store[TTx]) expireMany(ctx context.Context, tx keelsql.Querier, ids, versions []int64, now time.Time) ([]expired, error) {
	rows, err := tx.Query(ctx, s.sql("ExpireMany"), int64s(ids), int64s(versions), now)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (expired, error) {
		var x expired
		return x, r.Scan(&x.id, &x.version, &x.offer)
	})
}

// releasedID is a released reservation at its new version; appeal is the
// end of its appeal window (SQLite's statement).
type releasedID struct {
	id, version int64
	appeal      time.Time
}

// pgRelease is what PostgreSQL's one release statement did: the released
// reservations, the slots that took their places back and the release
// notices it wrote.
type pgRelease struct {
	released []releasedID
	slots    map[int64]*slotState
	written  []outboxRef
}

// releaseManyPG releases held reservations (ids at versions, in slots) in
// one statement: state, places, history, no-shows and release notices
// (see ReleaseMany).
func (s *store[TTx]) releaseManyPG(ctx context.Context, tx keelsql.Querier, ids, versions, slots []int64, now time.Time, actor, reason string) (*pgRelease, error) {
	rows, err := tx.Query(ctx, s.sql("ReleaseMany"), ids, versions, slots, now, actor, reason)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := &pgRelease{slots: map[int64]*slotState{}}
	for rows.Next() {
		var kind string
		var id, version, slot int64
		var at time.Time
		var capacity, held, waiting, n int
		if err := rows.Scan(&kind, &id, &version, &at, &slot, &capacity, &held, &waiting, &n); err != nil {
			return nil, err
		}
		switch kind {
		case "r":
			out.released = append(out.released, releasedID{id: id, version: version})
		case "s":
			out.slots[id] = &slotState{ID: id, Capacity: capacity, Held: held, Waiting: waiting, EndsAt: at, Freed: n}
		case "n":
			out.written = append(out.written, outboxRef{id: id, kind: kindRelease, deliverAt: at})
		}
	}
	return out, rows.Err()
}

// releaseManySQLite moves held reservations (ids at versions) to released;
// SQLite has no data-modifying CTEs, so places, history, no-shows and
// notices are the caller's further statements.
func (s *store[TTx]) releaseManySQLite(ctx context.Context, tx keelsql.Querier, ids, versions []int64, now time.Time) ([]releasedID, error) {
	rows, err := tx.Query(ctx, s.sql("ReleaseMany"), int64s(ids), int64s(versions), now)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (releasedID, error) {
		var x releasedID
		return x, r.Scan(&x.id, &x.version, &x.appeal)
	})
}

// insertRun records a run and sets its id.
func (s *store[TTx]) insertRun(ctx context.Context, run *Run) error {
	return s.db.QueryRow(ctx, s.sql("RunInsert"), run.Kind, run.Instance, run.StartedAt, run.FinishedAt,
		run.Scanned, run.Released, run.Failed, run.RestoreOK, run.RestoreFailed, run.Promoted, run.HoldsExpired,
		run.DryRun, run.DeadLettered, run.FirstID, run.LastID, run.Errors).Scan(&run.ID)
}

// runs lists run records newest first (kind "" for every kind), ids below
// before when it is not 0.
func (s *store[TTx]) runs(ctx context.Context, kind string, before int64, limit int) ([]*Run, error) {
	rows, err := s.db.Query(ctx, s.sql("RunList"), kind, before, limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (*Run, error) {
		x := &Run{}
		return x, r.Scan(&x.ID, &x.Kind, &x.Instance, &x.StartedAt, &x.FinishedAt, &x.Scanned, &x.Released, &x.Failed,
			&x.RestoreOK, &x.RestoreFailed, &x.Promoted, &x.HoldsExpired, &x.DryRun, &x.DeadLettered, &x.FirstID,
			&x.LastID, &x.Errors)
	})
}
