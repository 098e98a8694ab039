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

// homeTimeout bounds one module's home numbers, so that a slow module does
// not stall the sampling of the others or a page.
const homeTimeout = 5 * time.Second

// homeSource is a module's home numbers, sampled for their trends.
type homeSource struct {
	name  string
	homer module.Homer
}

// point is one sample of one home number.
type point struct {
	At time.Time
	V  float64
}

// sample is one point of the overview charts.
type sample struct {
	At        time.Time
	Completed float64 // jobs completed in this interval (all instances)
	Failed    float64 // jobs that ended failed or needing an operator in this interval (all instances)
	Backlog   int64   // live jobs, all queues (database-wide)
	OldestAge float64 // oldest available age in seconds, any queue
}

// sampler records samples in memory; they are a picture, not a record, and
// start afresh when the process does. The modules' home numbers are kept
// the same way, maxSamples points per number: they are counts over the
// database, so every instance draws the same curve, and writing them to a
// table would add a write per number and interval to the authority for a
// picture nobody needs after the incident (the records themselves stay in
// the modules' tables).
type sampler struct {
	engine api.Engine
	every  time.Duration
	homes  []homeSource

	mu      sync.Mutex
	samples []sample
	trends  map[string]map[string][]point // module → stat key → points
	last    time.Time                     // end of the previous sample's window
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
		s.takeHomes(ctx)
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
	s.last = p.At
	s.samples = append(s.samples, p)
	if len(s.samples) > maxSamples {
		s.samples = s.samples[len(s.samples)-maxSamples:]
	}
	s.mu.Unlock()
}

// takeHomes samples every module's home numbers; a module whose numbers
// cannot be read this time has a gap in its trend, nothing else.
func (s *sampler) takeHomes(ctx context.Context) {
	for _, h := range s.homes {
		hctx, cancel := context.WithTimeout(ctx, homeTimeout)
		stats, err := h.homer.Home(hctx)
		cancel()
		if err != nil {
			continue
		}
		s.record(h.name, time.Now(), stats)
	}
}

func (s *sampler) record(name string, at time.Time, stats []module.Stat) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.trends == nil {
		s.trends = map[string]map[string][]point{}
	}
	m := s.trends[name]
	if m == nil {
		m = map[string][]point{}
		s.trends[name] = m
	}
	for _, st := range stats {
		pts := append(m[st.Key], point{At: at, V: st.Value})
		if len(pts) > maxSamples {
			pts = pts[len(pts)-maxSamples:]
		}
		m[st.Key] = pts
	}
}

// trend is a copy of one home number's samples.
func (s *sampler) trend(name, key string) []point {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]point(nil), s.trends[name][key]...)
}

func (s *sampler) snapshot() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sample(nil), s.samples...)
}
