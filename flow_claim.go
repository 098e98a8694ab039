package keel

import (
	"context"
	"fmt"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// claimResult is one fetch: the jobs, whether more are probably waiting
// (some key filled its share), and when a rate-limited key gets its next
// token (0 = not rate bound).
type claimResult struct {
	rows   []*keeltype.JobRow
	more   bool
	nextIn time.Duration
	// keys were listed; truncated says the listing hit its limit, so keys
	// beyond them may have backlog too.
	keys      []string
	truncated bool
}

// claim fetches up to max jobs of queue, fairly across flow keys: it lists
// keys with backlog (rotating from where the last fetch stopped), gives each
// a weighted share, claims unlimited keys in one statement and limited keys
// under their row locks, where tokens, concurrency and breaker state are
// read and taken in the same transaction as the claim.
func (c *Client[TTx]) claim(ctx context.Context, p *producer, max int) (*claimResult, error) {
	fx := flowExec(c.driver.Executor())
	keys, err := fx.FlowKeysAvailable(ctx, &keeldriver.FlowKeysAvailableParams{Queue: p.queue, After: p.cursor, Limit: max})
	if err != nil || len(keys) == 0 {
		return &claimResult{}, err
	}
	limits, err := c.limits.get(ctx)
	if err != nil {
		return nil, err
	}
	p.cursor = keys[len(keys)-1]
	res := &claimResult{keys: keys, truncated: len(keys) >= max}
	shares := shareOut(keys, max, func(k string) int { return weightOf(limits.match(k, p.queue)) })
	var open, gated []string
	for _, k := range keys {
		if limits.match(k, p.queue).Gated() {
			gated = append(gated, k)
		} else {
			open = append(open, k)
		}
	}
	if len(open) > 0 {
		if err := c.claimOpen(ctx, fx, p.queue, open, shares, res); err != nil {
			return nil, err
		}
	}
	if len(gated) > 0 {
		if err := c.claimGated(ctx, p.queue, gated, shares, limits, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func weightOf(l *keeltype.FlowLimit) int {
	if l == nil || l.Weight < 1 {
		return 1
	}
	return l.Weight
}

// shareOut splits max claims across keys in proportion to their weights,
// each key getting at least one while claims last; the total never exceeds
// max (it is the number of free worker slots).
func shareOut(keys []string, budget int, weight func(string) int) map[string]int {
	if len(keys) > budget {
		keys = keys[:budget]
	}
	total := 0
	w := make([]int, len(keys))
	for i, k := range keys {
		w[i] = weight(k)
		total += w[i]
	}
	shares := make(map[string]int, len(keys))
	sum := 0
	for i, k := range keys {
		shares[k] = max(1, budget*w[i]/total)
		sum += shares[k]
	}
	for i := 0; sum > budget; i = (i + 1) % len(keys) {
		if shares[keys[i]] > 1 {
			shares[keys[i]]--
			sum--
		}
	}
	for i := 0; sum < budget; i = (i + 1) % len(keys) {
		shares[keys[i]]++
		sum++
	}
	return shares
}

func (c *Client[TTx]) claimOpen(ctx context.Context, fx keeldriver.FlowExecutor, queue string, keys []string, shares map[string]int, res *claimResult) error {
	ns := make([]int, len(keys))
	for i, k := range keys {
		ns[i] = shares[k]
	}
	rows, err := fx.JobClaimKeys(ctx, &keeldriver.JobClaimKeysParams{Queue: queue, Owner: c.config.ID,
		LeaseDuration: c.config.LeaseDuration, Keys: keys, Ns: ns})
	if err != nil {
		return fmt.Errorf("claiming: %w", err)
	}
	res.rows = append(res.rows, rows...)
	res.more = res.more || filledShare(rows, keys, ns)
	return nil
}

func filledShare(rows []*keeltype.JobRow, keys []string, ns []int) bool {
	got := map[string]int{}
	for _, r := range rows {
		got[r.FlowKey]++
	}
	for i, k := range keys {
		if got[k] >= ns[i] {
			return true
		}
	}
	return false
}

// claimGated claims limited keys inside one transaction holding their rows:
// no other instance can take the same tokens or exceed the same concurrency
// limit in between.
func (c *Client[TTx]) claimGated(ctx context.Context, queue string, keys []string, shares map[string]int, limits *limitSet, res *claimResult) error {
	tx, err := c.driver.Executor().Begin(ctx)
	if err != nil {
		return fmt.Errorf("beginning gated claim: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	fx := flowExec(tx)
	now := time.Now().UTC()
	locked, err := fx.FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{Keys: keys, SkipLocked: true, Now: &now})
	if err != nil {
		return fmt.Errorf("locking flow keys: %w", err)
	}
	plan := c.planGated(queue, locked, shares, limits, now, res)
	if len(plan.keys) > 0 {
		rows, err := fx.JobClaimKeys(ctx, &keeldriver.JobClaimKeysParams{Queue: queue, Owner: c.config.ID,
			LeaseDuration: c.config.LeaseDuration, Keys: plan.keys, Ns: plan.ns, Now: &now})
		if err != nil {
			return fmt.Errorf("claiming limited keys: %w", err)
		}
		settle(locked, rows, limits, queue)
		res.rows = append(res.rows, rows...)
		res.more = res.more || filledShare(rows, plan.keys, plan.ns)
	}
	if err := fx.FlowKeysSave(ctx, locked, &now); err != nil {
		return fmt.Errorf("saving flow keys: %w", err)
	}
	return tx.Commit(ctx)
}

type gatedPlan struct {
	keys []string
	ns   []int
}

func (c *Client[TTx]) planGated(queue string, locked []*keeltype.FlowKeyRow, shares map[string]int, limits *limitSet, now time.Time, res *claimResult) gatedPlan {
	var plan gatedPlan
	for _, k := range locked {
		l := limits.match(k.Key, queue)
		n, wait := allowance(l, k, now)
		n = min(n, shares[k.Key])
		if wait > 0 && (res.nextIn == 0 || wait < res.nextIn) {
			res.nextIn = wait
		}
		if n < shares[k.Key] {
			c.metrics.Throttled.WithLabelValues(k.Key).Inc()
			c.metrics.TokenWait.WithLabelValues(k.Key).Add(wait.Seconds())
		}
		if n > 0 {
			plan.keys, plan.ns = append(plan.keys, k.Key), append(plan.ns, n)
		}
	}
	return plan
}

// settle takes what was actually claimed (possibly less than planned) from
// each key's tokens and probes.
func settle(locked []*keeltype.FlowKeyRow, rows []*keeltype.JobRow, limits *limitSet, queue string) {
	got := map[string]int{}
	for _, r := range rows {
		got[r.FlowKey]++
	}
	for _, k := range locked {
		if n := got[k.Key]; n > 0 {
			take(limits.match(k.Key, queue), k, n)
		}
	}
}
