package reservation

import (
	"context"
	"errors"
	"time"

	"github.com/keelwork/keel/keelsql"
)

// insertReservation adds a pending_payment reservation holding a place of
// slot until hold (waitlistID: the waitlist entry it is offered to, or 0)
// and returns its id, version and category.
func (s *store[TTx]) insertReservation(ctx context.Context, q keelsql.Querier, slot int64, user string, hold time.Time, waitlistID int64, now time.Time) (id, version int64, category string, err error) {
	err = q.QueryRow(ctx, s.sql("ReservationInsert"), slot, user, hold, waitlistID, now).Scan(&id, &version, &category)
	return id, version, category, err
}

// reservation reads one reservation; keeltype.ErrNotFound when there is none.
func (s *store[TTx]) reservation(ctx context.Context, q keelsql.Querier, id int64) (*Reservation, error) {
	return scanReservation(q.QueryRow(ctx, s.sql("ReservationGet"), id))
}

// lockReservation reads a reservation holding its row for the rest of the
// transaction.
func (s *store[TTx]) lockReservation(ctx context.Context, tx keelsql.Querier, id int64) (*Reservation, error) {
	return scanReservation(tx.QueryRow(ctx, s.sql("ReservationLock"), id))
}

// markPaid moves a reservation at version to paid with its grace and
// release point, returning the new version.
func (s *store[TTx]) markPaid(ctx context.Context, tx keelsql.Querier, id, version int64, now time.Time, grace int, due time.Time) (int64, error) {
	return one[int64](tx.QueryRow(ctx, s.sql("ReservationPay"), id, version, now, grace, due))
}

// markCheckedIn, markCancelled and markRestored move a reservation at
// version to their state and return the new version.
func (s *store[TTx]) markCheckedIn(ctx context.Context, tx keelsql.Querier, id, version int64, now time.Time) (int64, error) {
	return one[int64](tx.QueryRow(ctx, s.sql("ReservationCheckIn"), id, version, now))
}

func (s *store[TTx]) markCancelled(ctx context.Context, tx keelsql.Querier, id, version int64, now time.Time) (int64, error) {
	return one[int64](tx.QueryRow(ctx, s.sql("ReservationCancel"), id, version, now))
}

func (s *store[TTx]) markRestored(ctx context.Context, tx keelsql.Querier, id, version int64, now time.Time) (int64, error) {
	return one[int64](tx.QueryRow(ctx, s.sql("ReservationRestore"), id, version, now))
}

// moveReservation puts a reservation at version in another slot with a new
// grace and release point and returns the new version.
func (s *store[TTx]) moveReservation(ctx context.Context, tx keelsql.Querier, id, version, slot int64, grace int, due, now time.Time) (int64, error) {
	return one[int64](tx.QueryRow(ctx, s.sql("ReservationMove"), id, version, slot, grace, due, now))
}

// reservations lists reservations newest first.
func (s *store[TTx]) reservations(ctx context.Context, f ReservationFilter) ([]*Reservation, error) {
	rows, err := s.db.Query(ctx, s.sql("ReservationList"), string(f.State), f.SlotID, f.ResourceID, f.CategoryID,
		f.UserID, f.DeadLetters, f.Before, f.Limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (*Reservation, error) { return scanReservation(r) })
}

// insertHistory appends one state change.
func (s *store[TTx]) insertHistory(ctx context.Context, q keelsql.Querier, id int64, from, to State, version int64, actor, reason string, at time.Time) error {
	_, err := q.Exec(ctx, s.sql("HistoryInsert"), id, string(from), string(to), version, actor, reason, at)
	return err
}

// insertHistoryMany appends the same state change of many reservations,
// each at its own new version.
func (s *store[TTx]) insertHistoryMany(ctx context.Context, tx keelsql.Querier, ids, versions []int64, from, to State, actor, reason string, at time.Time) error {
	_, err := tx.Exec(ctx, s.sql("HistoryInsertMany"), int64s(ids), int64s(versions), string(from), string(to), actor, reason, at)
	return err
}

// history lists a reservation's state changes, oldest first.
func (s *store[TTx]) history(ctx context.Context, id int64) ([]HistoryEntry, error) {
	rows, err := s.db.Query(ctx, s.sql("HistoryList"), id)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (HistoryEntry, error) {
		var h HistoryEntry
		var from, to string
		err := r.Scan(&from, &to, &h.Version, &h.Actor, &h.Reason, &h.At)
		h.FromState, h.ToState = State(from), State(to)
		return h, err
	})
}

// stateCounts counts reservations per state.
func (s *store[TTx]) stateCounts(ctx context.Context) (map[State]int, error) {
	rows, err := s.db.Query(ctx, s.sql("StateCounts"))
	type sc struct {
		s State
		n int
	}
	list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (sc, error) {
		var x sc
		var st string
		err := r.Scan(&st, &x.n)
		x.s = State(st)
		return x, err
	})
	if err != nil {
		return nil, err
	}
	out := make(map[State]int, len(list))
	for _, x := range list {
		out[x.s] = x.n
	}
	return out, nil
}

// doubleReleases counts reservations with more than one release in their
// history.
func (s *store[TTx]) doubleReleases(ctx context.Context) (int, error) {
	return one[int](s.db.QueryRow(ctx, s.sql("DoubleReleases")))
}

// dueCount counts paid, never-failed reservations past their release point;
// dueDryRunCount those of them in dry-run categories.
func (s *store[TTx]) dueCount(ctx context.Context, now time.Time) (int, error) {
	return one[int](s.db.QueryRow(ctx, s.sql("DueCount"), now))
}

func (s *store[TTx]) dueDryRunCount(ctx context.Context, now time.Time) (int, error) {
	return one[int](s.db.QueryRow(ctx, s.sql("DueCountDryRun"), now))
}

// markFailed counts one more failed release of a paid reservation at
// version (a dead letter at maxRetries). ok is false when the reservation
// is no longer paid at that version.
func (s *store[TTx]) markFailed(ctx context.Context, tx keelsql.Querier, id, version int64, msg string, now time.Time, maxRetries int) (count int, dead, ok bool, err error) {
	err = tx.QueryRow(ctx, s.sql("MarkFailed"), id, version, msg, now, maxRetries, now).Scan(&count, &dead)
	if errors.Is(err, keelsql.ErrNoRows) {
		return 0, false, false, nil
	}
	return count, dead, err == nil, err
}

// retryDue lists failed reservations whose retry is due.
func (s *store[TTx]) retryDue(ctx context.Context, now time.Time, limit int) ([]Candidate, error) {
	rows, err := s.db.Query(ctx, s.sql("RetryDue"), now, limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Candidate, error) {
		var c Candidate
		return c, r.Scan(&c.ID, &c.Version)
	})
}

// deadLetterCount counts the paid reservations whose release gave up.
func (s *store[TTx]) deadLetterCount(ctx context.Context) (int, error) {
	return one[int](s.db.QueryRow(ctx, s.sql("DeadLetterCount")))
}

// requeueDeadLetter clears a dead letter's retries and returns its version;
// keelsql.ErrNoRows when it is not a dead letter.
func (s *store[TTx]) requeueDeadLetter(ctx context.Context, tx keelsql.Querier, id int64, now time.Time) (int64, error) {
	return one[int64](tx.QueryRow(ctx, s.sql("DeadLetterRequeue"), id, now))
}
