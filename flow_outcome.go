package keel

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// trackedOutcome is a finish whose key counts failures (breaker or
// auto-pause configured).
type trackedOutcome struct {
	index int // into the finish batch
	key   string
	limit *keeltype.FlowLimit
	o     outcome
}

func (c *Client[TTx]) trackedOutcomes(ctx context.Context, batch []*pendingFinish) []trackedOutcome {
	var out []trackedOutcome
	var limits *limitSet
	for i, f := range batch {
		if f.row.FlowKey == "" {
			continue
		}
		if limits == nil {
			var err error
			if limits, err = c.limits.get(ctx); err != nil {
				return nil
			}
		}
		l := limits.match(f.row.FlowKey, f.row.Queue)
		if !l.Tracked() {
			continue
		}
		if o, ok := failureOutcome(f.params.State, f.params.Error, f.row.ID); ok {
			out = append(out, trackedOutcome{index: i, key: f.row.FlowKey, limit: l, o: o})
		}
	}
	return out
}

// finishBatch commits a batch of finishes. When some belong to tracked keys,
// the finishes and the keys' counters, breaker moves and auto-pauses (with
// their audit rows) commit in one transaction: the Nth failure pauses the
// key before any further claim can see it unpaused.
func (c *Client[TTx]) finishBatch(ctx context.Context, batch []*pendingFinish, params []*keeldriver.JobFinishParams) ([]keeldriver.JobFinishResult, error) {
	tracked := c.trackedOutcomes(ctx, batch)
	if len(tracked) == 0 {
		return c.driver.Executor().JobFinishMany(ctx, params)
	}
	tx, err := c.driver.Executor().Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("beginning finish: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	results, err := tx.JobFinishMany(ctx, params)
	if err != nil {
		return nil, err
	}
	pauses, err := c.recordOutcomes(ctx, tx, tracked, results)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("committing finish: %w", err)
	}
	c.afterAutoPause(pauses)
	return results, nil
}

// recordOutcomes applies applied outcomes to their locked key rows, in batch
// order, and audits any auto-pause, all in ex's transaction.
func (c *Client[TTx]) recordOutcomes(ctx context.Context, ex keeldriver.Executor, tracked []trackedOutcome, results []keeldriver.JobFinishResult) ([]*autoPause, error) {
	var keys []string
	for _, t := range tracked {
		if results[t.index].Applied && !slices.Contains(keys, t.key) {
			keys = append(keys, t.key)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	slices.Sort(keys)
	now := time.Now().UTC()
	fx := flowExec(ex)
	rows, err := fx.FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{Keys: keys, Now: &now})
	if err != nil {
		return nil, fmt.Errorf("locking flow keys for outcomes: %w", err)
	}
	byKey := map[string]*keeltype.FlowKeyRow{}
	for _, r := range rows {
		byKey[r.Key] = r
	}
	var pauses []*autoPause
	for _, t := range tracked {
		if k := byKey[t.key]; k != nil && results[t.index].Applied {
			if p := record(t.limit, k, t.o, now); p != nil {
				pauses = append(pauses, p)
			}
		}
	}
	if err := fx.FlowKeysSave(ctx, rows, &now); err != nil {
		return nil, fmt.Errorf("saving flow keys: %w", err)
	}
	for _, p := range pauses {
		actx := map[string]any{ReasonCodeKey: ReasonFailureThreshold}
		for k, v := range p.context {
			actx[k] = v
		}
		a := Audit{Action: "flowkey.autopause", Target: "flowkey:" + p.key,
			Reason:  fmt.Sprintf("%v consecutive failures reached the threshold of %v", p.context["consecutive_failures"], p.context["threshold"]),
			Context: actx}
		if _, err := ex.AuditInsert(ctx, auditRow(WithActor(ctx, "system:autopause"), a)); err != nil {
			return nil, fmt.Errorf("auditing auto-pause: %w", err)
		}
		if err := c.batchKeyPaused(ctx, ex, p); err != nil {
			return nil, fmt.Errorf("recording batch key auto-pause: %w", err)
		}
	}
	return pauses, nil
}

func (c *Client[TTx]) afterAutoPause(pauses []*autoPause) {
	for _, p := range pauses {
		c.metrics.AutoPaused.WithLabelValues(p.key).Inc()
		c.logger.Warn("flow key paused after consecutive failures", "key", p.key,
			"failures", p.context["consecutive_failures"], "last_error", p.context["last_error"])
	}
}
