package keel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// ValidateFlowLimit says which field of a limit is wrong.
func ValidateFlowLimit(l *keeltype.FlowLimit) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: flow limit %q: %s", keeltype.ErrInvalidArgument, l.Pattern, fmt.Sprintf(format, args...))
	}
	p := l.Pattern
	switch {
	case p == "" || len(p) > 256 || strings.Count(p, "*") > 1 || (strings.Contains(p, "*") && !strings.HasSuffix(p, "*")):
		return bad("pattern must be a key, a prefix ending in '*', or '*'")
	case l.Queue != "" && !validName(l.Queue):
		return bad("bad queue name %q", l.Queue)
	case l.Rate < 0 || l.Rate > 1e6:
		return bad("rate must be 0..1000000 per second, got %v", l.Rate)
	case l.Burst < 0 || l.Burst > 1e6 || l.MaxRunning < 0 || l.MaxRunning > 1e6:
		return bad("burst and max running must be 0..1000000")
	case l.BreakerFailures < 0 || l.AutoPauseFailures < 0 || l.BreakerProbes < 0 || l.BreakerMinCalls < 0:
		return bad("breaker and auto-pause counts must not be negative")
	case l.BreakerRatio < 0 || l.BreakerRatio > 1:
		return bad("breaker ratio must be 0..1, got %v", l.BreakerRatio)
	case l.BreakerRatio > 0 && l.BreakerWindow <= 0:
		return bad("a breaker ratio needs a positive window")
	case (l.BreakerFailures > 0 || l.BreakerRatio > 0) && l.BreakerCooldown <= 0:
		return bad("a breaker needs a positive cool-down")
	case l.Weight < 0 || l.Weight > 1000:
		return bad("weight must be 1..1000, got %d", l.Weight)
	}
	return validateRamp(l, bad)
}

func validateRamp(l *keeltype.FlowLimit, bad func(string, ...any) error) error {
	var last time.Duration = -1
	for i, s := range l.Ramp {
		if s.After <= last || s.Rate <= 0 {
			return bad("ramp step %d must come after the previous one with a positive rate", i)
		}
		last = s.After
	}
	if len(l.Ramp) > 0 && l.Rate <= 0 {
		return bad("a ramp needs a final rate")
	}
	return nil
}

// FlowLimitSet creates or replaces a limit; every instance applies it within
// a second (at once when notifications work). Audited.
func (c *Client[TTx]) FlowLimitSet(ctx context.Context, l *keeltype.FlowLimit, reason string) (*keeltype.FlowLimit, error) {
	if err := ValidateFlowLimit(l); err != nil {
		return nil, err
	}
	if l.Weight == 0 {
		l.Weight = 1
	}
	l.UpdatedBy = ActorFrom(ctx)
	var out *keeltype.FlowLimit
	a := Audit{Action: "flowlimit.set", Target: "flowlimit:" + l.Pattern, Reason: reason, Context: limitContext(l)}
	err := c.inAuditedTx(ctx, a, func(ex keeldriver.Executor) error {
		var err error
		out, err = flowExec(ex).FlowLimitUpsert(ctx, l)
		return err
	})
	if err == nil {
		c.flowChanged(ctx, "limits")
	}
	return out, err
}

func limitContext(l *keeltype.FlowLimit) map[string]any {
	return map[string]any{"queue": l.Queue, "rate": l.Rate, "burst": l.Burst, "max_running": l.MaxRunning,
		"breaker_failures": l.BreakerFailures, "breaker_ratio": l.BreakerRatio, "autopause_failures": l.AutoPauseFailures,
		"weight": l.Weight, "ramp_steps": len(l.Ramp)}
}

// FlowLimitDelete removes a limit. Audited.
func (c *Client[TTx]) FlowLimitDelete(ctx context.Context, pattern, queue, reason string) error {
	a := Audit{Action: "flowlimit.delete", Target: "flowlimit:" + pattern, Reason: reason, Context: map[string]any{"queue": queue}}
	err := c.inAuditedTx(ctx, a, func(ex keeldriver.Executor) error {
		return flowExec(ex).FlowLimitDelete(ctx, pattern, queue)
	})
	if err == nil {
		c.flowChanged(ctx, "limits")
	}
	return err
}

// FlowLimitOf returns the limit that governs key's claims in queue, or nil
// when none does: the same match the claims make (exact pattern first, then
// the longest prefix, a queue's own limit before one for every queue), read
// from this client's cached limits, which a limit change anywhere refreshes.
// A worker that must keep a key's rate beyond the claim (pacing its writes
// to a counterpart) asks this rather than keeping the rate a second time.
func (c *Client[TTx]) FlowLimitOf(ctx context.Context, key, queue string) (*keeltype.FlowLimit, error) {
	set, err := c.limits.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading flow limits: %w", err)
	}
	if set, err = c.batchLimitsFresh(ctx, []string{key}, queue, set); err != nil {
		return nil, fmt.Errorf("reading flow limits: %w", err)
	}
	return set.match(key, queue), nil
}

// FlowLimits lists configured limits.
func (c *Client[TTx]) FlowLimits(ctx context.Context) ([]*keeltype.FlowLimit, error) {
	return flowExec(c.driver.Executor()).FlowLimitList(ctx)
}

// FlowKeyPause pauses one key (e.g. one customer application) on every
// instance: claims check the key's row. Audited.
func (c *Client[TTx]) FlowKeyPause(ctx context.Context, key, reason string) (*keeltype.FlowKeyRow, error) {
	return c.changeKey(ctx, key, Audit{Action: "flowkey.pause", Reason: reason}, func(k *keeltype.FlowKeyRow, now time.Time) error {
		if k.PausedAt != nil {
			return fmt.Errorf("%w: flow key %q is already paused", keeltype.ErrInvalidState, key)
		}
		k.PausedAt, k.PausedBy, k.PauseReason, k.PauseContext = ptr(now), ActorFrom(ctx), "manual", []byte(`{}`)
		return nil
	})
}

// FlowKeyResume resumes a paused key (manual or automatic pause): the
// failure count restarts at zero and a configured ramp starts. Audited.
func (c *Client[TTx]) FlowKeyResume(ctx context.Context, key, reason string) (*keeltype.FlowKeyRow, error) {
	return c.changeKey(ctx, key, Audit{Action: "flowkey.resume", Reason: reason}, func(k *keeltype.FlowKeyRow, now time.Time) error {
		if k.PausedAt == nil {
			return fmt.Errorf("%w: flow key %q is not paused", keeltype.ErrInvalidState, key)
		}
		k.PausedAt, k.PausedBy, k.PauseReason, k.PauseContext = nil, "", "", []byte(`{}`)
		k.ConsecutiveFailures, k.RampStartedAt = 0, ptr(now)
		return nil
	})
}

// FlowKeyCloseBreaker closes a key's breaker by hand. Audited.
func (c *Client[TTx]) FlowKeyCloseBreaker(ctx context.Context, key, reason string) (*keeltype.FlowKeyRow, error) {
	return c.changeKey(ctx, key, Audit{Action: "flowkey.breaker_close", Reason: reason}, func(k *keeltype.FlowKeyRow, now time.Time) error {
		k.BreakerState, k.BreakerProbesLeft, k.ConsecutiveFailures, k.RampStartedAt = keeltype.BreakerClosed, 0, 0, ptr(now)
		return nil
	})
}

// changeKey locks the key's row (waiting for claimers), applies change and
// audits it in one transaction.
func (c *Client[TTx]) changeKey(ctx context.Context, key string, a Audit, change func(*keeltype.FlowKeyRow, time.Time) error) (*keeltype.FlowKeyRow, error) {
	if key == "" || len(key) > 256 {
		return nil, fmt.Errorf("%w: flow key must be 1..256 bytes", keeltype.ErrInvalidArgument)
	}
	a.Target = "flowkey:" + key
	var out *keeltype.FlowKeyRow
	err := c.inAuditedTx(ctx, a, func(ex keeldriver.Executor) error {
		now := time.Now().UTC()
		fx := flowExec(ex)
		rows, err := fx.FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{Keys: []string{key}, Now: &now})
		if err != nil || len(rows) != 1 {
			return fmt.Errorf("locking flow key %q: %w", key, err)
		}
		if err := change(rows[0], now); err != nil {
			return err
		}
		out = rows[0]
		return fx.FlowKeysSave(ctx, rows, &now)
	})
	if err == nil {
		c.flowChanged(ctx, "key")
	}
	return out, err
}

// FlowKeyGet returns a key's state. A key is stored only once a limit is
// applied to it or an operator acts on it; a key that has jobs but no such
// row reads as its default state (not paused, breaker closed) with its
// running count, since it is as real to an operator following a job's key
// as a stored one. A key with neither is keeltype.ErrNotFound.
func (c *Client[TTx]) FlowKeyGet(ctx context.Context, key string) (*keeltype.FlowKeyRow, error) {
	fx := flowExec(c.driver.Executor())
	row, err := fx.FlowKeyGet(ctx, key)
	if !errors.Is(err, keeltype.ErrNotFound) {
		return row, err
	}
	stats, serr := fx.FlowKeyStats(ctx, []string{key})
	if serr != nil {
		return nil, fmt.Errorf("reading flow key %q: %w", key, serr)
	}
	for _, st := range stats {
		var n int64
		for _, count := range st.Counts {
			n += count
		}
		if n > 0 {
			return &keeltype.FlowKeyRow{Key: key, BreakerState: keeltype.BreakerClosed,
				Running: int(st.Counts[keeltype.JobStateRunning])}, nil
		}
	}
	return nil, err
}

// FlowKeyList pages persisted key states.
func (c *Client[TTx]) FlowKeyList(ctx context.Context, params *FlowKeyListParams) ([]*keeltype.FlowKeyRow, error) {
	return flowExec(c.driver.Executor()).FlowKeyList(ctx, params.driverParams())
}

// FlowKeyStats returns job counts and oldest available age per key.
func (c *Client[TTx]) FlowKeyStats(ctx context.Context, keys []string) ([]*keeltype.FlowKeyStats, error) {
	return flowExec(c.driver.Executor()).FlowKeyStats(ctx, keys)
}

func (c *Client[TTx]) flowChanged(ctx context.Context, what string) {
	c.limits.invalidate()
	c.notifyControl(ctx, "flow:"+what)
}

// applyConfiguredLimits upserts the limits given in Config at start-up.
func (c *Client[TTx]) applyConfiguredLimits(ctx context.Context) error {
	for i := range c.config.FlowLimits {
		l := c.config.FlowLimits[i]
		if _, err := c.FlowLimitSet(WithActor(ctx, "config:"+c.config.ID), &l, "configured in code"); err != nil {
			return fmt.Errorf("applying FlowLimits[%d]: %w", i, err)
		}
	}
	return nil
}
