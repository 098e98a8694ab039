package keel

import (
	"context"
	"time"

	"github.com/keelwork/keel/keeldriver"
)

// heartbeater extends the leases of this client's running jobs every third
// of the lease. A job whose extension is refused has been rescued and
// re-claimed (or cancelled) elsewhere: its context is cancelled so it stops
// producing side effects, and its eventual commit is rejected by the fence.
type heartbeater struct {
	beat func(ctx context.Context)
	tick time.Duration
}

func newHeartbeater[TTx any](c *Client[TTx]) *heartbeater {
	return &heartbeater{tick: c.config.LeaseDuration / 3, beat: c.heartbeat}
}

func (h *heartbeater) run(ctx context.Context) {
	t := time.NewTicker(h.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.beat(ctx)
		}
	}
}

func (c *Client[TTx]) heartbeat(ctx context.Context) {
	ids, fences := c.registry.leases()
	if len(ids) == 0 {
		return
	}
	extended, err := c.driver.Executor().JobHeartbeat(ctx, &keeldriver.JobHeartbeatParams{
		Owner: c.config.ID, IDs: ids, Fences: fences, LeaseDuration: c.config.LeaseDuration,
	})
	if err != nil {
		if ctx.Err() != nil {
			// The client is stopping: the beat was cut short by the stop,
			// which is not a failure. The leases run out, or the stop's own
			// path hands the jobs back.
			return
		}
		// Transient: the next beat retries well before the lease runs out.
		c.logger.Warn("heartbeat failed", "jobs", len(ids), "error", err)
		return
	}
	kept := make(map[int64]bool, len(extended))
	for _, id := range extended {
		kept[id] = true
	}
	for _, id := range ids {
		if kept[id] {
			continue
		}
		if exe := c.registry.get(id); exe != nil {
			c.metrics.LeaseLost.Inc()
			c.logger.Warn("lease lost; stopping job", "job_id", id, "fence", exe.row.Fence)
			exe.cancel(errLeaseLost)
		}
	}
}
