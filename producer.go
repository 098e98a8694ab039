package keel

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

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
	// cursor is the last flow key served; the next fetch starts after it,
	// so keys take turns.
	cursor string
	// sweepFrom is the first key of a sweep that has claimed nothing yet.
	sweepFrom string
}

// clientCore is the part of Client a producer needs; it hides TTx.
type clientCore interface {
	cfg() *Config
	runJob(ctx context.Context, p *producer, row *keeltype.JobRow)
	claim(ctx context.Context, p *producer, max int) (*claimResult, error)
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
		res := p.fetch(ctx, free)
		p.backlog = len(res.rows) == free || res.more || p.sweeping(res)
		if !p.backlog {
			resetTimer(poll, nextPoll(p.client.cfg().FetchPollInterval, res.nextIn))
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

// sweeping reports whether to fetch again at once because the last fetch
// listed only some of the keys with backlog and claimed nothing from them
// (all throttled or paused): the next fetch starts after them. It stops once
// the listing wraps around to where the fruitless sweep began, so keys that
// are all throttled cost one pass, not a busy loop.
func (p *producer) sweeping(res *claimResult) bool {
	if len(res.rows) > 0 || !res.truncated {
		p.sweepFrom = ""
		return false
	}
	if p.sweepFrom == "" {
		p.sweepFrom = res.keys[0]
		return true
	}
	for _, k := range res.keys {
		if k == p.sweepFrom {
			p.sweepFrom = ""
			return false
		}
	}
	return true
}

// nextPoll is the poll interval, or sooner when a rate-limited key gets
// its next token: waking exactly then is what lets a limited key reach its
// full rate without busy polling.
func nextPoll(poll, nextToken time.Duration) time.Duration {
	if nextToken > 0 && nextToken < poll {
		return nextToken
	}
	return poll
}

func (p *producer) fetch(ctx context.Context, free int) *claimResult {
	m := p.client.metricsOf()
	start := time.Now()
	res, err := p.client.claim(ctx, p, free)
	m.ClaimLatency.WithLabelValues(p.queue).Observe(time.Since(start).Seconds())
	if err != nil {
		if ctx.Err() == nil {
			p.client.cfg().Logger.Error("claiming jobs", "queue", p.queue, "error", err)
		}
		return &claimResult{}
	}
	m.Claimed.WithLabelValues(p.queue).Add(float64(len(res.rows)))
	for _, row := range res.rows {
		p.running.Add(1)
		go p.client.runJob(ctx, p, row)
	}
	return res
}

// done frees a slot.
func (p *producer) done() {
	p.running.Add(-1)
	signal(p.slotCh)
}
