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

func (s *scriptedCore) claim(ctx context.Context, _, _ string, _, _ int, _ *keyListing) (*claimResult, error) {
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
	core, p := startWakeLoop(t, 1)
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

// startWakeLoop runs one wake-up (secondary) loop of a producer of max
// slots whose claims the test answers, polling hourly, and answers its
// first poll with nothing; the loop stops when the test ends.
func startWakeLoop(t *testing.T, max int) (*scriptedCore, *producer) {
	core := &scriptedCore{config: (&Config{FetchPollInterval: time.Hour}).withDefaults(),
		metrics: newMetrics(), claims: make(chan chan *claimResult)}
	p := newProducer[any](nil, "q", max)
	p.client = core
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); p.loop(ctx, false) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	(<-core.claims) <- &claimResult{} // the loop's first poll: nothing
	return core, p
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

// TestAheadLimitFollowsTheStartRate: the fetch-ahead buffer holds what the
// workers start in aheadWindow, never less than one pool (so a claim still
// batches) nor more than its capacity. A fixed size held slow jobs away from
// a newly inserted job of higher priority, and from other instances, for
// seconds; a small one made fast drains claim a few hundred rows per commit.
func TestAheadLimitFollowsTheStartRate(t *testing.T) {
	p := newProducer[any](nil, "q", 10)
	t0 := time.Unix(1_000_000, 0)
	if got := p.aheadLimit(t0); got != 10 {
		t.Fatalf("before any start: limit %d, want one pool (10)", got)
	}
	// 40 starts per second: 4 in the window, below one pool.
	p.starts.Add(4)
	if got := p.aheadLimit(t0.Add(100 * time.Millisecond)); got != 10 {
		t.Fatalf("at 20 starts/s (smoothed): limit %d, want one pool (10)", got)
	}
	// 20,000 starts per second for a while: the buffer grows to its
	// capacity and no further.
	at := t0.Add(100 * time.Millisecond)
	var got int
	for range 10 {
		at = at.Add(50 * time.Millisecond)
		p.starts.Add(1000)
		got = p.aheadLimit(at)
	}
	if want := aheadMaxPools * 10; got != want {
		t.Fatalf("at 20,000 starts/s: limit %d, want the capacity %d", got, want)
	}
	// A sample shorter than rateSample changes nothing.
	p.starts.Add(1_000_000)
	if again := p.aheadLimit(at.Add(rateSample / 2)); again != got || p.startRate > 30_000 {
		t.Fatalf("a short sample moved the rate to %.0f/s (limit %d)", p.startRate, again)
	}
	p.starts.Add(-1_000_000)
	// 800 starts per second: 80 in the window, between the bounds.
	for range 20 {
		at = at.Add(50 * time.Millisecond)
		p.starts.Add(40)
		got = p.aheadLimit(at)
	}
	if got < 75 || got > 85 {
		t.Fatalf("at 800 starts/s: limit %d, want about 80", got)
	}
	// Idle: back to one pool.
	for range 20 {
		at = at.Add(time.Second)
		got = p.aheadLimit(at)
	}
	if got != 10 {
		t.Fatalf("after idle seconds: limit %d, want one pool (10)", got)
	}
}

// TestClaimWidthFollowsTheRoom: a claim lists one key per rowsPerKey rows it
// may bring, between keysPerClaim and keysPerClaimMax, and never more keys
// than rows (each listed key gets at least one).
func TestClaimWidthFollowsTheRoom(t *testing.T) {
	for _, c := range []struct{ want, keys int }{
		{1, 1}, {10, 10}, {100, 16}, {256, 16}, {512, 32}, {1700, 106}, {2048, 128}, {50000, 128},
	} {
		if got := claimWidth(c.want); got != c.keys {
			t.Errorf("claimWidth(%d) = %d, want %d", c.want, got, c.keys)
		}
	}
}

// TestEveryLaterWaitsOneInterval: the leader's tidy loops (pruning, samples,
// ageing, recounts) wait an interval before their first run, so a leader that
// starts beside a backlog leaves the cores to the drain; the loops that move
// jobs run at once.
func TestEveryLaterWaitsOneInterval(t *testing.T) {
	for _, c := range []struct {
		later bool
		runs  int
	}{{false, 1}, {true, 0}} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // stopped before the first interval passes
		runs := 0
		every(ctx, time.Hour, c.later, func(context.Context) { runs++ })
		if runs != c.runs {
			t.Errorf("later=%v: ran %d times before the first interval, want %d", c.later, runs, c.runs)
		}
	}
}

// TestWakeUpsClaimSideBySide: a claim woken by an insert leaves room for
// the next wake-up while it is in flight. When the first one reserved
// every free slot, a job inserted during its commit (a WAL flush away:
// milliseconds, or hundreds on a stalled disk) waited for it and for one
// more claim; the loops beside it had nothing to claim with.
func TestWakeUpsClaimSideBySide(t *testing.T) {
	p := newProducer[any](nil, "q", 8)
	var got []int
	for range fetchLoops {
		n, ok := p.reserveWake()
		if !ok {
			t.Fatalf("wake-up %d found no room beside %v of 8 slots in flight", len(got)+1, got)
		}
		got = append(got, n)
	}
	if got[0] != 4 || got[1] != 2 {
		t.Fatalf("wake-up shares %v, want halves of the room (4, 2, ...)", got)
	}
	// The shares never add up to more than the slots: with all four in
	// flight (4+2+1+1) nothing is left for another claim.
	if n, ok := p.reserve(1); ok || p.reserved != 8 {
		t.Fatalf("after %v a further claim got %d (%v); %d of 8 slots reserved", got, n, ok, p.reserved)
	}
}

// TestWakeUpLoopHandsBacklogToPrimary: a wake-up loop whose claim leaves a
// backlog (here the start of a sweep over keys its listing cut off, with
// no row claimed, so no job's end will wake anyone) tells the primary,
// which alone fetches a backlog. Without it the keys after the cut waited
// for the poll interval: TestHeldKeysBeyondOneClaim timed out once two
// wake-up claims could run side by side and the second found the first's
// rows locked.
func TestWakeUpLoopHandsBacklogToPrimary(t *testing.T) {
	core, p := startWakeLoop(t, 8)
	p.wake()
	(<-core.claims) <- &claimResult{truncated: true, keys: []string{"k00"}}
	waitFor(t, func() bool { return len(p.slotCh) == 1 })
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.backlog {
		t.Fatal("the sweep's backlog was not recorded")
	}
}

// TestStaleFetchKeepsBacklog: fetches of several loops settle in any
// order, and one that began before a backlog or a sweep was recorded
// cannot end it. Two wake-up claims listed the same first keys; the one
// settling first found nothing there (the other held the rows) and began a
// sweep, and the other, listing those keys too, ended it as a pass that
// wrapped around: the keys after them waited for the poll
// (TestHeldKeysBeyondOneClaim, 1 run in 40 on a loaded machine).
func TestStaleFetchKeepsBacklog(t *testing.T) {
	first := []string{"k00", "k01", "k02", "k03"}
	t.Run("sweep", func(t *testing.T) {
		p := newProducer[any](nil, "q", 8)
		_, a := p.beginFetch()
		_, b := p.beginFetch()
		if !p.settle(4, &claimResult{keys: first, truncated: true, startGen: b}) {
			t.Fatal("a fruitless truncated listing did not begin a sweep")
		}
		if !p.settle(4, &claimResult{keys: append(first, "k04"), truncated: true, startGen: a}) {
			t.Fatal("a fetch begun before the sweep ended it")
		}
		// A fetch begun after the sweep, from the cursor it left, goes on;
		// the one whose listing wraps around to the sweep's first key ends it.
		_, c := p.beginFetch()
		if !p.settle(4, &claimResult{keys: []string{"k05", "k06"}, truncated: true, startGen: c}) {
			t.Fatal("the sweep ended before it wrapped around")
		}
		_, d := p.beginFetch()
		if p.settle(4, &claimResult{keys: []string{"k07", "k00"}, truncated: true, startGen: d}) {
			t.Fatal("the sweep did not end where it began")
		}
	})
	t.Run("cursor", func(t *testing.T) {
		// Two fetches began from the start; one that began later moved the
		// cursor on; the earlier one, settling last, must not move it
		// back: the next listing would repeat keys, and a sweep would meet
		// its first key before reaching the keys after them.
		p := newProducer[any](nil, "q", 8)
		_, a := p.beginFetch()
		_, b := p.beginFetch()
		p.settle(4, &claimResult{keys: []string{"k04", "k05"}, truncated: true, cursor: "k05", startGen: b})
		p.settle(4, &claimResult{keys: first, truncated: true, cursor: "k03", startGen: a})
		if cursor, _ := p.beginFetch(); cursor != "k05" {
			t.Fatalf("cursor %q after a stale fetch settled, want k05", cursor)
		}
	})
	t.Run("backlog", func(t *testing.T) {
		p := newProducer[any](nil, "q", 8)
		_, a := p.beginFetch()
		_, b := p.beginFetch()
		rows := make([]*keeltype.JobRow, 4)
		if !p.settle(4, &claimResult{rows: rows, startGen: b}) {
			t.Fatal("a claim that filled its room left no backlog")
		}
		if !p.settle(4, &claimResult{startGen: a}) {
			t.Fatal("a fetch begun before the backlog was found cleared it")
		}
		_, c := p.beginFetch()
		if p.settle(4, &claimResult{startGen: c}) {
			t.Fatal("an empty fetch begun after the backlog did not clear it")
		}
	})
}
