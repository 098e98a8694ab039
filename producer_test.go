package keel

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/keelwork/keel/internal/testwait"
	"github.com/keelwork/keel/keeltype"
)

// scriptedCore is a clientCore whose claims the test answers one by one.
type scriptedCore struct {
	config  *Config
	metrics *Metrics
	claims  chan chan *claimResult
}

func (s *scriptedCore) cfg() *Config                      { return s.config }
func (s *scriptedCore) metricsOf() *Metrics               { return s.metrics }
func (s *scriptedCore) limited(context.Context) bool      { return false }
func (s *scriptedCore) runJobs(p *producer, _ *execution) { p.done() }
func (s *scriptedCore) handBack(*execution)               {}
func (s *scriptedCore) register(ctx context.Context, row *keeltype.JobRow) *execution {
	return &execution{row: row, ctx: ctx}
}

func (s *scriptedCore) claim(ctx context.Context, _, _ string, _, _ int) (*claimResult, error) {
	reply := make(chan *claimResult)
	select {
	case s.claims <- reply:
	case <-ctx.Done():
		return &claimResult{}, nil
	}
	select {
	case res := <-reply:
		return res, nil
	case <-ctx.Done():
		return &claimResult{}, nil
	}
}

// TestWakeDuringClaimIsNotLost: a wake-up that finds every slot reserved by
// a claim in flight must lead to another claim once that one settles. The
// claim in flight may have read the queue before the rows behind the
// wake-up were committed; with the poll an hour away, only the deferred
// wake-up can fetch them. The loop under test is the secondary one (the
// primary would count the fetch-ahead buffer as room and fetch anyway); the
// test plays the primary itself, so the interleaving is exact.
func TestWakeDuringClaimIsNotLost(t *testing.T) {
	core := &scriptedCore{config: (&Config{FetchPollInterval: time.Hour}).withDefaults(),
		metrics: newMetrics(), claims: make(chan chan *claimResult)}
	p := newProducer[any](nil, "q", 1)
	p.client = core
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); p.loop(ctx, false) }()
	defer func() { cancel(); wg.Wait() }()

	(<-core.claims) <- &claimResult{} // the loop's first poll: nothing
	// The primary's claim takes the only slot once the first one settled.
	var inFlight int
	waitFor(t, func() bool {
		n, ok := p.reserve(1)
		inFlight = n
		return ok
	})
	p.wake() // rows committed while that claim is in flight
	waitFor(t, func() bool { return p.deferred() && len(p.wakeCh) == 0 })
	p.settle(inFlight, &claimResult{}) // it read the queue before those rows

	select {
	case next := <-core.claims:
		next <- &claimResult{}
	case <-time.After(30 * time.Second):
		t.Fatal("no claim after a wake-up that arrived while every slot was reserved")
	}
}

func (p *producer) deferred() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deferredWake
}

// waitFor polls cond until it holds, failing after 30 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testwait.For(t, 30*time.Second, "the condition", cond)
}
