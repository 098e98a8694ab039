package reservation

import (
	"context"
	"errors"
	"time"

	"github.com/keelwork/keel/keelsql"
)

// policy reads the no-show policy.
func (s *store[TTx]) policy(ctx context.Context, q keelsql.Querier) (*Policy, error) {
	p := &Policy{}
	err := q.QueryRow(ctx, s.sql("PolicyGet")).Scan(&p.Enabled, &p.Threshold, &p.WindowDays, &p.RestrictDays,
		&p.Version, &p.UpdatedAt, &p.UpdatedBy)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// updatePolicy replaces the policy at p.Version and returns the new
// version; keelsql.ErrNoRows when it is at another.
func (s *store[TTx]) updatePolicy(ctx context.Context, tx keelsql.Querier, p Policy, now time.Time, actor string) (int64, error) {
	return one[int64](tx.QueryRow(ctx, s.sql("PolicyUpdate"), p.Version, p.Enabled, p.Threshold, p.WindowDays,
		p.RestrictDays, now, actor))
}

// expireRestrictions ends the users' restrictions that ran out by now.
func (s *store[TTx]) expireRestrictions(ctx context.Context, tx keelsql.Querier, users []string, now time.Time) error {
	_, err := tx.Exec(ctx, s.sql("RestrictionsExpire"), strs(users), now)
	return err
}

// restrictionHit is a user the policy restricted, with the no-shows that
// counted.
type restrictionHit struct {
	user string
	n    int
}

// restrictMany restricts until `until` those of users with threshold
// no-shows since `since` and no restriction in force.
func (s *store[TTx]) restrictMany(ctx context.Context, tx keelsql.Querier, users []string, since time.Time, threshold int, now, until time.Time) ([]restrictionHit, error) {
	rows, err := tx.Query(ctx, s.sql("RestrictMany"), strs(users), since, threshold, now, until)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (restrictionHit, error) {
		var h restrictionHit
		return h, r.Scan(&h.user, &h.n)
	})
}

func scanRestriction(row scanner) (*Restriction, error) {
	r := &Restriction{}
	err := row.Scan(&r.ID, &r.UserID, &r.Since, &r.Until, &r.NoShows, &r.LiftedAt, &r.LiftedBy, &r.LiftReason)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// activeRestriction returns the user's restriction in force, or nil.
func (s *store[TTx]) activeRestriction(ctx context.Context, q keelsql.Querier, user string, now time.Time) (*Restriction, error) {
	r, err := scanRestriction(q.QueryRow(ctx, s.sql("RestrictionActive"), user, now))
	if errors.Is(err, keelsql.ErrNoRows) {
		return nil, nil
	}
	return r, err
}

// noShowCounts fills a user's all-time, in-window (since) and voided
// no-show counts.
func (s *store[TTx]) noShowCounts(ctx context.Context, rec *NoShowRecord, since time.Time) error {
	return s.db.QueryRow(ctx, s.sql("NoShowCounts"), rec.UserID, since).Scan(&rec.Total, &rec.InWindow, &rec.Voided)
}

// voidUserNoShows voids every no-show of a user and returns how many.
func (s *store[TTx]) voidUserNoShows(ctx context.Context, tx keelsql.Querier, user string, now time.Time, actor, reason string) (int64, error) {
	return tx.Exec(ctx, s.sql("NoShowVoidUser"), user, now, actor, reason)
}

// voidReservationNoShow voids the no-show of one reservation.
func (s *store[TTx]) voidReservationNoShow(ctx context.Context, tx keelsql.Querier, id int64, now time.Time, actor, reason string) error {
	_, err := tx.Exec(ctx, s.sql("NoShowVoidReservation"), id, now, actor, reason)
	return err
}

// liftRestrictions lifts the user's restrictions in force and returns
// their ids.
func (s *store[TTx]) liftRestrictions(ctx context.Context, tx keelsql.Querier, user string, now time.Time, actor, reason string) ([]int64, error) {
	rows, err := tx.Query(ctx, s.sql("RestrictionLift"), user, now, actor, reason)
	return scanIDs(rows, err)
}

// insertNoShows records one no-show per reservation (ids, users and
// categories side by side).
func (s *store[TTx]) insertNoShows(ctx context.Context, tx keelsql.Querier, ids []int64, users, categories []string, now time.Time) error {
	_, err := tx.Exec(ctx, s.sql("NoShowInsertMany"), int64s(ids), strs(users), strs(categories), now)
	return err
}
