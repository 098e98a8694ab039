package reservation

import (
	"errors"
	"time"

	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
)

// Lists are keelsql Arrays: native arrays on PostgreSQL, JSON text read
// with json_each on SQLite; the statements of each dialect are written for
// its form.

func (m *Module[TTx]) int64s(v []int64) any { return keelsql.ArrayOf(v) }

func (m *Module[TTx]) strs(v []string) any { return keelsql.ArrayOf(v) }

func (m *Module[TTx]) times(v []time.Time) any { return keelsql.ArrayOf(v) }

// sql returns the dialect's statement by name.
func (m *Module[TTx]) sql(name string) string { return m.q.Get(name) }

const reservationColumns = 25

func scanReservation(row interface{ Scan(...any) error }) (*Reservation, error) {
	r := &Reservation{}
	var state string
	err := row.Scan(&r.ID, &r.SlotID, &r.ResourceID, &r.CategoryID, &r.UserID, &state, &r.StartsAt, &r.EndsAt,
		&r.GraceMinutes, &r.ExpectedReleaseAt, &r.HoldExpiresAt, &r.AppealUntil, &r.Version, &r.RetryCount,
		&r.LastError, &r.NextRetryAt, &r.DeadAt, &r.CreatedAt, &r.UpdatedAt, &r.PaidAt, &r.CheckedInAt,
		&r.ReleasedAt, &r.CancelledAt, &r.RestoredAt, &r.ExpiredAt)
	if err != nil {
		return nil, notFound(err)
	}
	r.State = State(state)
	utc(&r.StartsAt, &r.EndsAt, &r.CreatedAt, &r.UpdatedAt)
	utcp(r.ExpectedReleaseAt, r.HoldExpiresAt, r.AppealUntil, r.NextRetryAt, r.DeadAt, r.PaidAt, r.CheckedInAt,
		r.ReleasedAt, r.CancelledAt, r.RestoredAt, r.ExpiredAt)
	return r, nil
}

// utc normalises scanned times to UTC (pgx returns them in the local zone).
func utc(ts ...*time.Time) {
	for _, t := range ts {
		*t = t.UTC()
	}
}

func utcp(ts ...*time.Time) {
	for _, t := range ts {
		if t != nil {
			*t = t.UTC()
		}
	}
}

// notFound maps keelsql.ErrNoRows to keeltype.ErrNotFound (a 404).
func notFound(err error) error {
	if errors.Is(err, keelsql.ErrNoRows) {
		return keeltype.ErrNotFound
	}
	return err
}
