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
	p, err := m.st.policy(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("reading the no-show policy: %w", err)
	}
	return p, nil
}

// Policy returns the no-show policy.
func (m *Module[TTx]) Policy(ctx context.Context) (*Policy, error) { return m.policy(ctx, m.st.db) }

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
	err = m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		_, err := m.st.updatePolicy(ctx, tx, p, now, keel.ActorFrom(ctx))
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
	if err := m.st.expireRestrictions(ctx, tx, users, p.now); err != nil {
		return fmt.Errorf("ending lapsed restrictions: %w", err)
	}
	since := p.now.Add(-time.Duration(p.policy.WindowDays) * day)
	until := p.now.Add(time.Duration(p.policy.RestrictDays) * day)
	hits, err := m.st.restrictMany(ctx, tx, users, since, p.policy.Threshold, p.now, until)
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

// activeRestriction returns the user's restriction in force, or nil.
func (m *Module[TTx]) activeRestriction(ctx context.Context, q keelsql.Querier, user string, now time.Time) (*Restriction, error) {
	r, err := m.st.activeRestriction(ctx, q, user, now)
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
	if err := m.st.noShowCounts(ctx, rec, since); err != nil {
		return nil, fmt.Errorf("counting the no-shows of %s: %w", user, err)
	}
	if rec.Restriction, err = m.activeRestriction(ctx, m.st.db, user, now); err != nil {
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
	return wrapf(m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		voided, err := m.st.voidUserNoShows(ctx, tx, user, now, actor, reason)
		if err != nil {
			return err
		}
		lifted, err := m.st.liftRestrictions(ctx, tx, user, now, actor, reason)
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
	return wrapf(m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		lifted, err := m.st.liftRestrictions(ctx, tx, user, now, actor, reason)
		if err != nil {
			return err
		}
		if len(lifted) == 0 {
			return errNoRestriction
		}
		return client.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "reservation.restriction_lift",
			Target: "user:" + user, Reason: reason, Context: map[string]any{"restriction": lifted[0]}})
	}), "lifting the restriction of %s", user)
}
