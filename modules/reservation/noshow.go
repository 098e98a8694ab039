package reservation

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
)

const day = 24 * time.Hour

func (m *Module[TTx]) policy(ctx context.Context, q keelsql.Querier) (*Policy, error) {
	p := &Policy{}
	err := q.QueryRow(ctx, m.sql("PolicyGet")).Scan(&p.Enabled, &p.Threshold, &p.WindowDays, &p.RestrictDays,
		&p.Version, &p.UpdatedAt, &p.UpdatedBy)
	if err != nil {
		return nil, fmt.Errorf("reading the no-show policy: %w", err)
	}
	return p, nil
}

// Policy returns the no-show policy.
func (m *Module[TTx]) Policy(ctx context.Context) (*Policy, error) { return m.policy(ctx, m.db) }

// Validate says which field is wrong.
func (p *Policy) Validate() error {
	switch {
	case p.Threshold < 1 || p.Threshold > 1000:
		return module.Invalid("threshold: 1..1000")
	case p.WindowDays < 1 || p.WindowDays > 3650:
		return module.Invalid("window_days: 1..3650")
	case p.RestrictDays < 1 || p.RestrictDays > 3650:
		return module.Invalid("restrict_days: 1..3650")
	}
	return nil
}

// SetPolicy replaces the policy at p.Version, audited.
func (m *Module[TTx]) SetPolicy(ctx context.Context, p Policy, reason string) (*Policy, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	client, err := m.engine()
	if err != nil {
		return nil, err
	}
	now := m.now()
	err = m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		var v int64
		err := tx.QueryRow(ctx, m.sql("PolicyUpdate"), p.Version, p.Enabled, p.Threshold, p.WindowDays, p.RestrictDays,
			now, keel.ActorFrom(ctx)).Scan(&v)
		if errors.Is(err, keelsql.ErrNoRows) {
			return module.Errorf(http.StatusConflict, "version_conflict", "the policy is not at version %d", p.Version)
		}
		if err != nil {
			return err
		}
		return client.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "reservation.noshow_policy",
			Target: "policy:noshow", Reason: reason, Context: map[string]any{"enabled": p.Enabled,
				"threshold": p.Threshold, "window_days": p.WindowDays, "restrict_days": p.RestrictDays}})
	})
	if err != nil {
		return nil, wrapf(err, "setting the no-show policy")
	}
	return m.Policy(ctx)
}

// applyPolicy restricts, in the release transaction, users whose no-shows
// reached the policy's threshold; each restriction is audited there too.
func (m *Module[TTx]) applyPolicy(ctx context.Context, tx keelsql.Tx[TTx], p *pass, users []string) error {
	if p.policy == nil || !p.policy.Enabled || len(users) == 0 {
		return nil
	}
	client, err := m.engine()
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, m.sql("RestrictionsExpire"), m.strs(users), p.now); err != nil {
		return fmt.Errorf("ending lapsed restrictions: %w", err)
	}
	since := p.now.Add(-time.Duration(p.policy.WindowDays) * day)
	until := p.now.Add(time.Duration(p.policy.RestrictDays) * day)
	rows, err := tx.Query(ctx, m.sql("RestrictMany"), m.strs(users), since, p.policy.Threshold, p.now, until)
	type hit struct {
		user string
		n    int
	}
	hits, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (hit, error) {
		var h hit
		return h, r.Scan(&h.user, &h.n)
	})
	if err != nil {
		return fmt.Errorf("applying the no-show policy: %w", err)
	}
	actx := keel.WithActor(ctx, "system:reservation.noshow_policy")
	for _, h := range hits {
		if err := client.AuditRecordTx(actx, tx.Native(), keel.Audit{Action: "reservation.restrict",
			Target: "user:" + h.user, Reason: fmt.Sprintf("%d no-shows within %d days", h.n, p.policy.WindowDays),
			Context: map[string]any{"until": until, "noshows": h.n}}); err != nil {
			return err
		}
	}
	return nil
}

func scanRestriction(row interface{ Scan(...any) error }) (*Restriction, error) {
	r := &Restriction{}
	err := row.Scan(&r.ID, &r.UserID, &r.Since, &r.Until, &r.NoShows, &r.LiftedAt, &r.LiftedBy, &r.LiftReason)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// activeRestriction returns the user's restriction in force, or nil.
func (m *Module[TTx]) activeRestriction(ctx context.Context, q keelsql.Querier, user string, now time.Time) (*Restriction, error) {
	r, err := scanRestriction(q.QueryRow(ctx, m.sql("RestrictionActive"), user, now))
	if errors.Is(err, keelsql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the restriction of %s: %w", user, err)
	}
	return r, nil
}

// NoShows returns a user's no-show record: all-time count, the count in
// the policy's window, voided ones, and any restriction in force.
func (m *Module[TTx]) NoShows(ctx context.Context, user string) (*NoShowRecord, error) {
	pol, err := m.Policy(ctx)
	if err != nil {
		return nil, err
	}
	now := m.now()
	rec := &NoShowRecord{UserID: user}
	since := now.Add(-time.Duration(pol.WindowDays) * day)
	if err := m.db.QueryRow(ctx, m.sql("NoShowCounts"), user, since).Scan(&rec.Total, &rec.InWindow, &rec.Voided); err != nil {
		return nil, fmt.Errorf("counting the no-shows of %s: %w", user, err)
	}
	if rec.Restriction, err = m.activeRestriction(ctx, m.db, user, now); err != nil {
		return nil, err
	}
	return rec, nil
}

// ResetNoShows voids every no-show of a user and lifts the user's
// restriction, audited: the policy's reversal.
func (m *Module[TTx]) ResetNoShows(ctx context.Context, user, reason string) error {
	client, err := m.engine()
	if err != nil {
		return err
	}
	now, actor := m.now(), keel.ActorFrom(ctx)
	return wrapf(m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		voided, err := tx.Exec(ctx, m.sql("NoShowVoidUser"), user, now, actor, reason)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, m.sql("RestrictionLift"), user, now, actor, reason)
		lifted, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (int64, error) {
			var id int64
			return id, r.Scan(&id)
		})
		if err != nil {
			return err
		}
		return client.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "reservation.noshow_reset",
			Target: "user:" + user, Reason: reason, Context: map[string]any{"voided": voided, "lifted": len(lifted)}})
	}), "resetting the no-shows of %s", user)
}

// LiftRestriction ends a user's restriction early, audited; the no-show
// record stays.
func (m *Module[TTx]) LiftRestriction(ctx context.Context, user, reason string) error {
	client, err := m.engine()
	if err != nil {
		return err
	}
	now, actor := m.now(), keel.ActorFrom(ctx)
	return wrapf(m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		var id int64
		err := tx.QueryRow(ctx, m.sql("RestrictionLift"), user, now, actor, reason).Scan(&id)
		if errors.Is(err, keelsql.ErrNoRows) {
			return errNoRestriction
		}
		if err != nil {
			return err
		}
		return client.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "reservation.restriction_lift",
			Target: "user:" + user, Reason: reason, Context: map[string]any{"restriction": id}})
	}), "lifting the restriction of %s", user)
}
