package console

import (
	"context"
	"sync"
	"time"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/server/api"
)

// maxSamples keeps the last hour at the default 10 s interval.
const maxSamples = 360

// sample is one point of the overview charts.
type sample struct {
	At        time.Time
	Completed float64 // jobs completed in this interval (all instances)
	Failed    float64 // jobs that ended failed or needing an operator in this interval (all instances)
	Backlog   int64   // live jobs, all queues (database-wide)
	OldestAge float64 // oldest available age in seconds, any queue
}

// sampler records samples in memory; they are a picture, not a record, and
// start afresh when the process does.
type sampler struct {
	engine api.Engine
	every  time.Duration

	mu      sync.Mutex
	samples []sample
	last    time.Time // end of the previous sample's window
	life    module.Lifecycle
}

func newSampler(e api.Engine, every time.Duration) *sampler {
	if every <= 0 {
		every = 10 * time.Second
	}
	return &sampler{engine: e, every: every}
}

// start begins sampling until stop; a second start while sampling does
// nothing.
func (s *sampler) start(ctx context.Context) {
	if _, err := s.life.Start(ctx); err == nil {
		s.life.Go(s.run)
	}
}

// stop ends sampling and waits for the sampler to return.
func (s *sampler) stop() { _ = s.life.Stop(context.Background()) }

func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.take(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *sampler) take(ctx context.Context) {
	stats, err := s.engine.QueueStats(ctx)
	if err != nil {
		return
	}
	p := sample{At: time.Now()}
	for _, q := range stats {
		for st, n := range q.Counts {
			if !st.Final() && st != keeltype.JobStateScheduled {
				p.Backlog += n
			}
		}
		if q.OldestAvailable != nil {
			p.OldestAge = max(p.OldestAge, time.Since(*q.OldestAvailable).Seconds())
		}
	}
	// Throughput is counted in the database, so the chart is the same on
	// every instance and covers all of them. The window starts where the
	// previous one ended, so no job is counted twice or missed between
	// samples; the first window is one interval long.
	since := s.last
	if since.IsZero() {
		since = p.At.Add(-s.every)
	}
	counts, err := s.engine.JobFinalizedCounts(ctx, since, p.At)
	if err != nil {
		return
	}
	p.Completed = float64(counts[keeltype.JobStateCompleted])
	p.Failed = float64(counts[keeltype.JobStateFailed] + counts[keeltype.JobStateManual])
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = p.At
	s.samples = append(s.samples, p)
	if len(s.samples) > maxSamples {
		s.samples = s.samples[len(s.samples)-maxSamples:]
	}
}

func (s *sampler) snapshot() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sample(nil), s.samples...)
}
