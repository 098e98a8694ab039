package keel

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// producer fetches jobs of one queue and runs each in its own goroutine, up
// to maxWorkers at once. It fetches when woken (insert notification, a slot
// freed while a backlog exists) or when the poll interval passes.
type producer struct {
	client  clientCore
	queue   string
	max     int
	running atomic.Int64

	wakeCh   chan struct{}
	slotCh   chan struct{}
	stopOnce sync.Once
	stopCh   chan struct{}
	backlog  bool
}

// clientCore is the part of Client a producer needs; it hides TTx.
type clientCore interface {
	exec() keeldriver.Executor
	cfg() *Config
	runJob(ctx context.Context, p *producer, row *keeltype.JobRow)
	metricsOf() *Metrics
}

func newProducer[TTx any](c *Client[TTx], queue string, max int) *producer {
	return &producer{
		client: c, queue: queue, max: max,
		wakeCh: make(chan struct{}, 1), slotCh: make(chan struct{}, 1), stopCh: make(chan struct{}),
	}
}

func (p *producer) wake() { signal(p.wakeCh) }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (p *producer) stopFetching() { p.stopOnce.Do(func() { close(p.stopCh) }) }

func (p *producer) run(ctx context.Context) {
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		if !p.waitForTurn(ctx, poll) {
			return
		}
		free := p.max - int(p.running.Load())
		n := p.fetch(ctx, free)
		p.backlog = n == free
		if !p.backlog {
			resetTimer(poll, p.client.cfg().FetchPollInterval)
		}
	}
}

// waitForTurn blocks until a fetch is due. With a backlog, enough freed
// slots are reason to fetch (a quarter of the pool, so claims stay batched);
// without one, only a notification or the poll timer is.
func (p *producer) waitForTurn(ctx context.Context, poll *time.Timer) bool {
	threshold := max(1, p.max/4)
	for {
		free := p.max - int(p.running.Load())
		if p.backlog && free >= threshold {
			select {
			case <-p.stopCh:
				return false
			default:
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-p.stopCh:
			return false
		case <-p.wakeCh:
			if free > 0 {
				return true
			}
			p.backlog = true
		case <-poll.C:
			poll.Reset(p.client.cfg().FetchPollInterval)
			if free > 0 {
				return true
			}
		case <-p.slotCh:
		}
	}
}

func resetTimer(t *time.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
}

func (p *producer) fetch(ctx context.Context, free int) int {
	m := p.client.metricsOf()
	start := time.Now()
	rows, err := p.client.exec().JobClaim(ctx, &keeldriver.JobClaimParams{
		Queue: p.queue, Owner: p.client.cfg().ID, Max: free, LeaseDuration: p.client.cfg().LeaseDuration,
	})
	m.ClaimLatency.WithLabelValues(p.queue).Observe(time.Since(start).Seconds())
	if err != nil {
		if ctx.Err() == nil {
			p.client.cfg().Logger.Error("claiming jobs", "queue", p.queue, "error", err)
		}
		return 0
	}
	m.Claimed.WithLabelValues(p.queue).Add(float64(len(rows)))
	for _, row := range rows {
		p.running.Add(1)
		go p.client.runJob(ctx, p, row)
	}
	return len(rows)
}

// done frees a slot.
func (p *producer) done() {
	p.running.Add(-1)
	signal(p.slotCh)
}
