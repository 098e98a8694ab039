// Package groupcommit runs requests that arrive concurrently in shared
// batches, so that many callers pay for one transaction and one commit
// instead of one each. A request joins the lane of its lane key — a key
// always has the same lane, so its requests are taken in arrival order —
// and the first submitter to find its lane idle makes it a leader, which
// takes the lane's waiting requests a batch at a time until none are
// left. Lanes run in parallel.
//
// The package decides only which requests run together and in what
// order; what a batch does, and how each caller learns its answer, is
// the caller's (typically a channel in the request that Run fills).
package groupcommit

import (
	"hash/fnv"
	"slices"
	"sync"
)

// Config is how a Group batches requests of type R.
type Config[R any] struct {
	// Lanes is how many batches may run at once (at least one).
	Lanes int
	// Max bounds the requests in one batch (at least one).
	Max int
	// Lane is a request's lane key. A lane's requests are taken in the
	// order they were submitted, except that one passed over for its
	// dedupe key, or handed back by Run, runs in a later batch than
	// requests behind it.
	Lane func(R) string
	// Key is a request's dedupe key: a batch holds at most one request
	// per key, and a second waits for the next batch, where the first
	// one's effect has committed and it is seen as a replay or duplicate
	// rather than racing it inside one transaction. Key is called under
	// the Group's lock: it must be cheap and must not call the Group.
	Key func(R) string
	// Run executes one batch (its requests in arrival order) and answers
	// them. It returns the positions in batch of the requests it did not
	// settle: they go back to the front of the lane, in arrival order
	// whatever order they are listed in, ahead of every request that came
	// while the batch ran, and run first in the next batch.
	Run func(batch []R) (again []int)
	// Spawn runs a lane's leader on a goroutine of its own. Without it the
	// submitter that found the lane idle leads it itself, and Submit
	// returns only when the lane is empty: no goroutine is started per
	// burst, but under a steady stream the lane may not empty for a long
	// time, and that submitter waits as long.
	Spawn bool
}

// Stats counts a Group's work.
type Stats struct {
	Lanes    int   // batches that may run at once
	Batches  int64 // batches run
	Requests int64 // requests they carried (a request handed back counts again)
	Largest  int   // most requests in one batch
	Waiting  int   // requests queued now, not yet in a batch
}

// Group batches the requests submitted to it; see Config.
type Group[R any] struct {
	cfg   Config[R]
	mu    sync.Mutex
	lanes []*lane[R]
	stats Stats
}

type lane[R any] struct {
	waiting []R
	running bool // a leader owns the lane: a submitter only queues
}

// New returns a Group batching by cfg.
func New[R any](cfg Config[R]) *Group[R] {
	cfg.Max = max(cfg.Max, 1)
	g := &Group[R]{cfg: cfg, lanes: make([]*lane[R], max(cfg.Lanes, 1))}
	for i := range g.lanes {
		g.lanes[i] = &lane[R]{}
	}
	return g
}

// Submit queues r in its lane, and leads the lane if it was idle (see
// Config.Spawn). It does not wait for r's batch otherwise: r's answer
// comes from Run.
func (g *Group[R]) Submit(r R) {
	l := g.laneOf(g.cfg.Lane(r))
	g.mu.Lock()
	l.waiting = append(l.waiting, r)
	lead := !l.running
	l.running = true
	g.mu.Unlock()
	switch {
	case !lead:
	case g.cfg.Spawn:
		go g.lead(l)
	default:
		g.lead(l)
	}
}

// Stats returns the Group's counters.
func (g *Group[R]) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.stats
	s.Lanes = len(g.lanes)
	for _, l := range g.lanes {
		s.Waiting += len(l.waiting)
	}
	return s
}

func (g *Group[R]) laneOf(key string) *lane[R] {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return g.lanes[h.Sum32()%uint32(len(g.lanes))]
}

// lead runs batches until the lane's queue is empty. The lane is released
// under the same lock that queues, so a request is never left waiting in
// a lane nobody leads.
func (g *Group[R]) lead(l *lane[R]) {
	for {
		batch := g.take(l)
		if batch == nil {
			return
		}
		if again := g.cfg.Run(batch); len(again) > 0 {
			g.handBack(l, batch, again)
		}
	}
}

// take removes the next batch from the lane, or releases the lane and
// returns nil when nothing waits.
func (g *Group[R]) take(l *lane[R]) []R {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(l.waiting) == 0 {
		l.running = false
		return nil
	}
	var batch, rest []R
	seen := map[string]bool{}
	for _, r := range l.waiting {
		if len(batch) < g.cfg.Max {
			if k := g.cfg.Key(r); !seen[k] {
				seen[k] = true
				batch = append(batch, r)
				continue
			}
		}
		rest = append(rest, r)
	}
	l.waiting = rest
	g.stats.Batches++
	g.stats.Requests += int64(len(batch))
	g.stats.Largest = max(g.stats.Largest, len(batch))
	return batch
}

// handBack puts the requests at positions again of batch back at the
// front of the lane: they arrived before anything now waiting.
func (g *Group[R]) handBack(l *lane[R], batch []R, again []int) {
	again = slices.Compact(slices.Sorted(slices.Values(again)))
	front := make([]R, len(again))
	for j, i := range again {
		front[j] = batch[i]
	}
	g.mu.Lock()
	l.waiting = append(front, l.waiting...)
	g.mu.Unlock()
}
