package keel

import (
	"context"
	"time"

	"github.com/keelwork/keel/keeldriver"
)

const leaderName = "maintenance"

// elector holds the maintenance leadership lease. Leadership only decides
// who runs maintenance (rescue, promotion, periodic jobs, pruning); nothing
// that needs correctness depends on a single leader: rescue and promotion
// are conditional updates, periodic ticks are idempotency keys.
type elector struct {
	exec    func() keeldriver.Executor
	id      string
	ttl     time.Duration
	start   func(ctx context.Context) // runs maintenance until ctx ends
	onLead  func(bool)
	logWarn func(msg string, args ...any)
}

func newElector[TTx any](c *Client[TTx]) *elector {
	return &elector{
		exec: c.driver.Executor, id: c.config.ID, ttl: c.config.LeaderTTL,
		start: func(ctx context.Context) { newMaintenance(c).run(ctx) },
		onLead: func(leading bool) {
			if leading {
				c.metrics.Leader.Set(1)
				c.logger.Info("elected maintenance leader")
			} else {
				c.metrics.Leader.Set(0)
				c.logger.Info("no longer maintenance leader")
			}
		},
		logWarn: c.logger.Warn,
	}
}

func (e *elector) params() *keeldriver.LeaderElectParams {
	return &keeldriver.LeaderElectParams{Name: leaderName, LeaderID: e.id, TTL: e.ttl}
}

// run campaigns every ttl/5 (so a dead leader is replaced within about 1.2
// ttl) and re-elects every ttl/3 while leading.
func (e *elector) run(ctx context.Context) {
	var stopLead context.CancelFunc
	var leadDone chan struct{}
	defer func() {
		if stopLead != nil {
			stopLead()
			<-leadDone
			_ = e.exec().LeaderResign(context.WithoutCancel(ctx), e.params())
			e.onLead(false)
		}
	}()
	for {
		won, err := e.exec().LeaderAttemptElect(ctx, e.params())
		if err != nil && ctx.Err() == nil {
			e.logWarn("leader election failed", "error", err)
		}
		switch {
		case won && stopLead == nil:
			var leadCtx context.Context
			leadCtx, stopLead = context.WithCancel(ctx)
			leadDone = make(chan struct{})
			go func() { defer close(leadDone); e.start(leadCtx) }()
			e.onLead(true)
		case !won && stopLead != nil:
			stopLead()
			<-leadDone
			stopLead = nil
			e.onLead(false)
		}
		wait := e.ttl / 5
		if stopLead != nil {
			wait = e.ttl / 3
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
