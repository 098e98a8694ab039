package keel

import (
	"context"
	"fmt"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// maintenance is the leader's work: promotion of due jobs, rescue of
// expired leases, periodic jobs, retention and queue statistics.
type maintenance[TTx any] struct {
	c *Client[TTx]
}

func newMaintenance[TTx any](c *Client[TTx]) *maintenance[TTx] { return &maintenance[TTx]{c: c} }

func (m *maintenance[TTx]) run(ctx context.Context) {
	cfg := m.c.config
	done := make(chan struct{})
	// What moves jobs (promotion, rescue, batch progress) runs at once: a
	// new leader may inherit due jobs and expired leases. What only tidies
	// or observes (pruning, metrics samples, ageing, batch recounts) waits
	// one interval: a leader often starts beside a backlog, when every core
	// is the drain's, and these statements read whole ranges (the live
	// jobs, every unfinished batch). Run at once, they took ~5% of a drain of
	// 100,000 jobs on an empty table and about a fifth beside 10,000,000
	// finished rows (docs/benchmarks.md).
	loops := []struct {
		every time.Duration
		f     func(context.Context)
		later bool
	}{
		{cfg.PromoteInterval, m.promote, false},
		{cfg.RescueInterval, m.rescue, false},
		{cfg.PruneInterval, m.prune, true},
		{5 * time.Second, m.sampleStats, true},
		{5 * time.Second, m.sampleFlow, true},
		{m.ageingTick(), m.agePriorities, true},
		{cfg.PromoteInterval, m.batches, false},
		{time.Minute, m.reconcileBatches, true},
	}
	for _, l := range loops {
		go func() { every(ctx, l.every, l.later, l.f); done <- struct{}{} }()
	}
	go func() { m.schedulePeriodic(ctx); done <- struct{}{} }()
	for range len(loops) + 1 {
		<-done
	}
}

// every runs f every d until ctx ends: the first time at once, or after d
// when later is set.
func every(ctx context.Context, d time.Duration, later bool, f func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	if later {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	for {
		f(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

const maintenanceBatch = 5000

func (m *maintenance[TTx]) promote(ctx context.Context) {
	for ctx.Err() == nil {
		queues, err := m.c.driver.Executor().JobPromote(ctx, &keeldriver.JobPromoteParams{Max: maintenanceBatch})
		if err != nil {
			m.warn(ctx, "promoting due jobs", err)
			return
		}
		for _, q := range queues {
			_ = m.c.driver.Notify(ctx, topicInsert, q)
		}
		if len(queues) == 0 {
			return
		}
	}
}

func (m *maintenance[TTx]) rescue(ctx context.Context) {
	rows, err := m.c.driver.Executor().JobRescue(ctx, &keeldriver.JobRescueParams{Max: maintenanceBatch})
	if err != nil {
		m.warn(ctx, "rescuing expired leases", err)
		return
	}
	queues := map[string]bool{}
	for _, r := range rows {
		m.c.metrics.LeaseExpired.Inc()
		m.c.logger.Warn("lease expired; job returned", "job_id", r.ID, "kind", r.Kind, "fence", r.Fence, "state", r.State)
		queues[r.Queue] = true
	}
	for q := range queues {
		_ = m.c.driver.Notify(ctx, topicInsert, q)
	}
}

func (m *maintenance[TTx]) prune(ctx context.Context) {
	if m.c.config.Retention < 0 {
		return
	}
	before := time.Now().Add(-m.c.config.Retention)
	for ctx.Err() == nil {
		n, err := m.c.driver.Executor().JobPrune(ctx, &keeldriver.JobPruneParams{Before: before, Max: maintenanceBatch})
		if err != nil {
			m.warn(ctx, "pruning finished jobs", err)
			return
		}
		if n < maintenanceBatch {
			return
		}
	}
}

func (m *maintenance[TTx]) ageingTick() time.Duration {
	if a := m.c.config.PriorityAgeing; a > 0 {
		return min(max(a/4, 10*time.Millisecond), 10*time.Second)
	}
	return time.Hour
}

func (m *maintenance[TTx]) agePriorities(ctx context.Context) {
	if m.c.config.PriorityAgeing <= 0 {
		return
	}
	_, err := flowExec(m.c.driver.Executor()).JobAgePriorities(ctx, &keeldriver.JobAgeParams{
		Interval: m.c.config.PriorityAgeing, Max: maintenanceBatch})
	if err != nil {
		m.warn(ctx, "ageing priorities", err)
	}
}

// sampleFlow exports the state of every persisted flow key.
func (m *maintenance[TTx]) sampleFlow(ctx context.Context) {
	fx := flowExec(m.c.driver.Executor())
	after := ""
	for ctx.Err() == nil {
		rows, err := fx.FlowKeyList(ctx, &keeldriver.FlowKeyListParams{After: after, Limit: 500})
		if err != nil {
			m.warn(ctx, "sampling flow keys", err)
			return
		}
		m.exportFlow(ctx, fx, rows)
		if len(rows) < 500 {
			return
		}
		after = rows[len(rows)-1].Key
	}
}

func (m *maintenance[TTx]) exportFlow(ctx context.Context, fx keeldriver.FlowExecutor, rows []*keeltype.FlowKeyRow) {
	mt := m.c.metrics
	keys := make([]string, len(rows))
	for i, k := range rows {
		keys[i] = k.Key
		mt.FlowRunning.WithLabelValues(k.Key).Set(float64(k.Running))
		mt.FlowBreaker.WithLabelValues(k.Key).Set(map[keeltype.BreakerState]float64{
			keeltype.BreakerHalfOpen: 1, keeltype.BreakerOpen: 2}[k.BreakerState])
		mt.FlowPaused.WithLabelValues(k.Key).Set(boolFloat(k.PausedAt != nil))
		mt.FlowFailures.WithLabelValues(k.Key).Set(float64(k.ConsecutiveFailures))
	}
	stats, err := fx.FlowKeyStats(ctx, keys)
	if err != nil {
		return
	}
	for _, s := range stats {
		age := 0.0
		if s.OldestAvailable != nil {
			age = time.Since(*s.OldestAvailable).Seconds()
		}
		mt.FlowOldestAvailable.WithLabelValues(s.Key).Set(age)
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (m *maintenance[TTx]) sampleStats(ctx context.Context) {
	stats, err := m.c.driver.Executor().QueueStats(ctx)
	if err != nil {
		m.warn(ctx, "sampling queue stats", err)
		return
	}
	for _, s := range stats {
		for _, st := range keeltype.AllJobStates {
			m.c.metrics.QueueDepth.WithLabelValues(s.Queue, string(st)).Set(float64(s.Counts[st]))
		}
		age := 0.0
		if s.OldestAvailable != nil {
			age = time.Since(*s.OldestAvailable).Seconds()
		}
		m.c.metrics.OldestAvailable.WithLabelValues(s.Queue).Set(age)
	}
}

// schedulePeriodic inserts each periodic job's latest tick, then sleeps to
// the next tick of any job. The tick is the idempotency key, so overlapping
// leaders and restarts insert each tick once.
func (m *maintenance[TTx]) schedulePeriodic(ctx context.Context) {
	jobs := m.c.config.PeriodicJobs
	if len(jobs) == 0 {
		return
	}
	inserted := make([]time.Time, len(jobs))
	for ctx.Err() == nil {
		now := time.Now()
		next := now.Add(time.Hour)
		for i, p := range jobs {
			if last, ok := m.insertTicks(ctx, p, p.dueTicks(inserted[i], now, 10*m.c.config.LeaderTTL)); ok {
				inserted[i] = last
			}
			next = minTime(next, p.Schedule.Next(now))
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// insertTicks inserts due ticks oldest first in batches: one statement per
// batch keeps a loaded leader from falling behind a fast schedule. It
// returns the last tick committed; a failed batch is retried next pass from
// there, so no tick is ever skipped.
func (m *maintenance[TTx]) insertTicks(ctx context.Context, p *PeriodicJob, ticks []time.Time) (time.Time, bool) {
	var last time.Time
	for len(ticks) > 0 {
		n := min(len(ticks), 100)
		params := make([]InsertParams, 0, n)
		for _, tick := range ticks[:n] {
			if ip, ok := tickParams(p, tick); ok {
				params = append(params, ip)
			}
		}
		if _, err := m.c.InsertMany(ctx, params); err != nil {
			m.warn(ctx, "inserting periodic job "+p.Name, err)
			return last, !last.IsZero()
		}
		last, ticks = ticks[n-1], ticks[n:]
	}
	return last, !last.IsZero()
}

func tickParams(p *PeriodicJob, tick time.Time) (InsertParams, bool) {
	args, opts := p.Construct(tick)
	if args == nil {
		return InsertParams{}, false
	}
	o := InsertOpts{}
	if opts != nil {
		o = *opts
	}
	o.IdempotencyKey = fmt.Sprintf("periodic:%s:%d", p.Name, tick.UnixNano())
	if o.RunAt.IsZero() {
		o.RunAt = tick
	}
	return InsertParams{Args: args, Opts: &o}, true
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func (m *maintenance[TTx]) warn(ctx context.Context, what string, err error) {
	if ctx.Err() == nil {
		m.c.logger.Warn(what+" failed", "error", err)
	}
}
