package keel

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// pendingFinish is a finished attempt waiting to be committed.
type pendingFinish struct {
	params *keeldriver.JobFinishParams
	row    *keeltype.JobRow
}

// completer commits finished attempts in batches: one statement moves up to
// CompleterBatchSize jobs, each conditioned on its own fence. Batching is
// what lets a drain run at tens of thousands of jobs per second; the fence in
// every row keeps it exactly as safe as committing one by one.
type completer struct {
	core   finishCore
	in     chan *pendingFinish
	done   chan struct{}
	mu     sync.RWMutex
	closed bool
}

// finishCore is what the completer needs from the client.
type finishCore interface {
	cfg() *Config
	finishBatch(ctx context.Context, batch []*pendingFinish, params []*keeldriver.JobFinishParams) ([]keeldriver.JobFinishResult, error)
	recordFinish(results []keeldriver.JobFinishResult, batch []*pendingFinish)
}

func newCompleter[TTx any](c *Client[TTx]) *completer {
	return &completer{core: c, in: make(chan *pendingFinish, 4*c.config.CompleterBatchSize), done: make(chan struct{})}
}

// add queues a finish; the bounded channel is the executors' backpressure.
func (cp *completer) add(f *pendingFinish) {
	cp.mu.RLock()
	defer cp.mu.RUnlock()
	if cp.closed {
		cp.flush([]*pendingFinish{f})
		return
	}
	cp.in <- f
}

func (cp *completer) close() {
	cp.mu.Lock()
	if !cp.closed {
		cp.closed = true
		close(cp.in)
	}
	cp.mu.Unlock()
	<-cp.done
}

func (cp *completer) run() {
	defer close(cp.done)
	size := cp.core.cfg().CompleterBatchSize
	batch := make([]*pendingFinish, 0, size)
	for {
		f, ok := <-cp.in
		if !ok {
			return
		}
		batch = append(batch[:0], f)
		batch = cp.collect(batch, size)
		cp.flush(batch)
	}
}

// collect gathers more finishes until the batch is full or the flush
// interval passes.
func (cp *completer) collect(batch []*pendingFinish, size int) []*pendingFinish {
	timer := time.NewTimer(cp.core.cfg().CompleterFlushInterval)
	defer timer.Stop()
	for len(batch) < size {
		select {
		case f, ok := <-cp.in:
			if !ok {
				return batch
			}
			batch = append(batch, f)
		case <-timer.C:
			return batch
		}
	}
	return batch
}

// flush commits a batch, retrying database errors for up to one lease: past
// that the leases have expired anyway and the rescuer owns the jobs.
func (cp *completer) flush(batch []*pendingFinish) {
	params := make([]*keeldriver.JobFinishParams, len(batch))
	for i, f := range batch {
		params[i] = f.params
	}
	deadline := time.Now().Add(cp.core.cfg().LeaseDuration)
	backoff := 10 * time.Millisecond
	for {
		results, err := cp.core.finishBatch(context.Background(), batch, params)
		if err == nil {
			cp.core.recordFinish(results, batch)
			return
		}
		if time.Now().After(deadline) {
			cp.core.cfg().Logger.Error("giving up committing finished jobs; leases will expire and the rescuer returns them",
				"jobs", len(batch), "error", err)
			return
		}
		cp.core.cfg().Logger.Warn("committing finished jobs failed, retrying", "jobs", len(batch), "error", err)
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// recordFinish logs and counts each committed or rejected transition.
func (c *Client[TTx]) recordFinish(results []keeldriver.JobFinishResult, batch []*pendingFinish) {
	var keyed []string
	for i, r := range results {
		f := batch[i]
		if !r.Applied {
			c.recordStale(f.row, f.params, r)
			continue
		}
		c.countOutcome(f.row, f.params)
		if f.row.FlowKey != "" && !slices.Contains(keyed, f.row.Queue) {
			keyed = append(keyed, f.row.Queue)
		}
	}
	// A key at its concurrency limit has room only once its jobs' ends are
	// committed (the limit counts running rows): tell fetchers waiting for
	// exactly that.
	for _, q := range keyed {
		c.withProducer(q, (*producer).runningFreed)
	}
}

func (c *Client[TTx]) recordStale(row *keeltype.JobRow, p *keeldriver.JobFinishParams, r keeldriver.JobFinishResult) {
	c.metrics.StaleFence.WithLabelValues(row.Kind).Inc()
	c.logger.Warn("stale commit rejected: the job is no longer ours",
		"job_id", row.ID, "kind", row.Kind, "fence", p.Fence, "wanted_state", p.State,
		"current_state", r.CurrentState, "current_fence", r.CurrentFence)
}

func (c *Client[TTx]) countOutcome(row *keeltype.JobRow, p *keeldriver.JobFinishParams) {
	m := c.metrics
	m.Outcomes.WithLabelValues(row.Queue, row.Kind, string(p.State)).Inc()
	switch p.State {
	case keeltype.JobStateCompleted:
		m.Completed.WithLabelValues(row.Queue, row.Kind).Inc()
	case keeltype.JobStateRetryable:
		m.Retried.WithLabelValues(row.Queue, row.Kind).Inc()
	}
	if p.Error != nil {
		m.Failed.WithLabelValues(row.Queue, row.Kind, string(p.Error.Class)).Inc()
	}
}
