package keel

import (
	"context"
	"fmt"

	"github.com/keelwork/keel/keeltype"
)

// queueKnown reports whether queue is one this deployment has: the default
// queue, a queue this client works, one with persisted control state, or
// one holding jobs. Pausing a name that is none of these would invent a
// queue that then shows in every list; it is refused as not found.
func (c *Client[TTx]) queueKnown(ctx context.Context, queue string) error {
	if queue == DefaultQueue {
		return nil
	}
	if _, ok := c.config.Queues[queue]; ok {
		return nil
	}
	rows, err := c.driver.Executor().QueueList(ctx)
	if err != nil {
		return fmt.Errorf("listing queues: %w", err)
	}
	for _, r := range rows {
		if r.Name == queue {
			return nil
		}
	}
	stats, err := c.driver.Executor().QueueStats(ctx)
	if err != nil {
		return fmt.Errorf("reading queue depth: %w", err)
	}
	for _, s := range stats {
		if s.Queue == queue {
			return nil
		}
	}
	return fmt.Errorf("queue %q: no such queue (it has no jobs and no worker): %w", queue, keeltype.ErrNotFound)
}
