package reservation

import (
	"errors"
	"time"

	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsql/sqlfile"
	"github.com/keelwork/keel/keeltype"
)

// store runs every statement of the module: one statement set per dialect
// (queries/<dialect>/*.sql), the same Go. Its methods take the Querier to
// run on (the caller's transaction, or the database for a read outside
// one) and return the module's records, never rows; the module decides
// what runs in which transaction and why.
type store[TTx any] struct {
	db keelsql.DB[TTx]
	q  sqlfile.Set
	// pg: the PostgreSQL statements differ in shape where PostgreSQL can do
	// more in one statement (the release, the scan's commit mode, row locks
	// on slots).
	pg bool
}

func newStore[TTx any](db keelsql.DB[TTx], q sqlfile.Set) *store[TTx] {
	return &store[TTx]{db: db, q: q, pg: db.Dialect() == "postgres"}
}

// sql returns the dialect's statement by name.
func (s *store[TTx]) sql(name string) string { return s.q.Get(name) }

// Lists are keelsql Arrays: native arrays on PostgreSQL, JSON text read
// with json_each on SQLite; the statements of each dialect are written for
// its form.

func int64s(v []int64) any { return keelsql.ArrayOf(v) }

func strs(v []string) any { return keelsql.ArrayOf(v) }

func times(v []time.Time) any { return keelsql.ArrayOf(v) }

type scanner interface{ Scan(...any) error }

const reservationColumns = 25

func scanReservation(row scanner) (*Reservation, error) {
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

// one scans a single value of a one-column, one-row statement.
func one[T any](row keelsql.Row) (T, error) {
	var v T
	err := row.Scan(&v)
	return v, err
}

// ids scans a list of ids.
func scanIDs(rows keelsql.Rows, err error) ([]int64, error) {
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (int64, error) {
		var id int64
		return id, r.Scan(&id)
	})
}
