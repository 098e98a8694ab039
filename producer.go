package keel

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelwork/keel/keeltype"
)

// fetchLoops is how many claims of one queue may be in flight at once. The
// loops after the first only serve wake-ups while no flow limit is
// configured: a job inserted while other claims are in flight then starts
// without waiting for them to finish (enqueue→start latency), while limited
// keys, which must be claimed within the free worker slots, are only ever
// claimed by the first loop. Two loops draining a backlog together were no
// faster on a 2-core PostgreSQL (they skip each other's locked rows), so the
// others do not join backlog fetches. There are three wake-up loops rather
// than one because a claim's commit waits for the WAL flush like any other:
// when flushes are slow (a busy disk), one wake-up loop was often still in
// its claim when the next insert committed, and the latency tail was made of
// that wait (bench --keel-causes: "claim wait" was the largest segment of 85
// of the 100 slowest jobs with one such loop, of 1–12 with three).
const fetchLoops = 4

// slotRetryMin and slotRetryMax bound the wait of a fetch that found every
// limited key saturated when no job ends to wake it (producer.slotRetry).
const (
	slotRetryMin = 50 * time.Millisecond
	slotRetryMax = 2 * time.Second
)

// The fetch-ahead buffer holds as many jobs as the workers start in
// aheadWindow, at least one pool and at most aheadMaxPools pools. A drain
// is bound by its one claim loop, and a claim costs a round trip and a
// commit whatever its size, so more rows per claim is more jobs per commit:
// with no-op jobs on a 2-core PostgreSQL a fixed buffer of four pools
// claimed ~270 rows per statement, this one ~850, and drained 100,000 jobs
// 1.26× faster (docs/benchmarks.md; two pools against four was
// 1.16–1.79× on a loaded machine). A fixed size cannot suit every job,
// though: jobs in the buffer have left the queue, so a job of higher
// priority inserted meanwhile starts after all of them, and another
// instance cannot take them. Sizing the buffer by time bounds that wait:
// sixteen pools of no-op jobs are ~40 ms of work, one pool of one-second
// jobs a second, where a fixed four pools would hold them for four seconds.
// The window also covers a claim's own latency (tens of milliseconds on a
// loaded machine), so the workers do not run dry while the next claim is
// in flight. The jobs in the buffer are leased and heartbeated like running
// ones, and a stop hands them back unstarted.
const (
	aheadWindow   = 100 * time.Millisecond
	aheadMaxPools = 16
	// rateSample is the shortest interval the start rate is measured over.
	rateSample = 25 * time.Millisecond
)

// producer fetches jobs of one queue and runs each in its own goroutine, up
// to max at once, plus a buffer fetched ahead while a backlog exists. It
// fetches when woken (insert notification, room freed while a backlog
// exists) or when the poll interval passes.
type producer struct {
	client  clientCore
	queue   string
	max     int
	running atomic.Int64

	wakeCh   chan struct{}
	slotCh   chan struct{}
	stopOnce sync.Once
	stopCh   chan struct{}
	// ahead holds jobs claimed beyond the free slots while a backlog exists
	// (fetch-ahead): a slot that frees takes the next one without a round
	// trip, and each claim moves more rows per commit. Its capacity is the
	// most it may hold; aheadLimit is what it may hold now.
	ahead chan *execution
	// starts counts jobs handed to a worker slot; startRate (jobs/s) is
	// sampled from it to size the buffer (aheadLimit).
	starts atomic.Int64

	mu sync.Mutex
	// reserved counts rows requested by claims in flight, so concurrent
	// loops never claim more than slots plus buffer can hold.
	reserved int
	backlog  bool
	// gen orders what the loops do: it counts up at every fetch's start
	// and at every record of a backlog or of a sweep's start. Up to four
	// fetches are in flight at once and settle in any order, so a fetch
	// that began before the backlog was recorded (its listing, its claim
	// racing the claim that found the backlog and skipping its locked
	// rows) says nothing about it: only a fetch that started after
	// backlogGen may clear backlog, and only one that started after
	// sweepGen may end a sweep. Without this a stale, fruitless fetch ended
	// the sweep another loop had just begun, and keys not listed yet
	// waited for the poll (TestStaleFetchKeepsBacklog).
	gen        uint64
	backlogGen uint64
	// slotBound: the backlog is of limited keys, which only free slots
	// serve (see claimResult.slotBound), so the buffer does not count.
	slotBound bool
	// wakeOnSlot: fetch when the next job ends, without waiting for the
	// poll interval.
	wakeOnSlot bool
	// slotRetry bounds that wait: the job whose end would free the key may
	// have ended while the fetch ran (its slot signal already spent), or
	// ended in memory while the database still counted it running (the
	// completer had not committed it), and then no further end comes to
	// wake the fetch. It doubles while such fetches find nothing, from
	// slotRetryMin to slotRetryMax, and resets when one claims.
	slotRetry time.Duration
	// deferredWake: a wake-up found no room because claims in flight had
	// reserved it; the next settle passes it on. Those claims may have
	// started before the rows that caused the wake-up were committed, and
	// nothing else would fetch them before the poll interval.
	deferredWake bool
	// cursor is the last flow key served; the next fetch starts after it,
	// so keys take turns. cursorGen is the gen of the fetch that set it.
	cursor    string
	cursorGen uint64
	// sweepFrom is the first key of a sweep that has claimed nothing yet,
	// begun at sweepGen.
	sweepFrom string
	sweepGen  uint64
	// errRetry is how soon to fetch again after a claim that failed (a
	// statement timed out on a loaded database, a connection dropped): the
	// failure says nothing about the backlog, and nothing else may wake
	// the loop before the poll interval, which can be long. It doubles
	// from slotRetryMin up to the poll interval while claims keep failing,
	// so a database that is down is not hammered, and resets on success.
	errRetry time.Duration
	// startRate is the jobs started per second, smoothed; rateAt and
	// rateStarts are where its last sample ended.
	startRate  float64
	rateAt     time.Time
	rateStarts int64
	// listing is the last claim's key listing, for the next claim to
	// reuse while it says nothing new (keyListing).
	listing keyListing
}

// clientCore is the part of Client a producer needs; it hides TTx.
type clientCore interface {
	cfg() *Config
	register(ctx context.Context, row *keeltype.JobRow) *execution
	runJobs(p *producer, exe *execution)
	handBack(exe *execution)
	claim(ctx context.Context, queue, cursor string, free, max int, listing *keyListing) (*claimResult, error)
	// limited reports whether any flow limit is configured.
	limited(ctx context.Context) bool
	metricsOf() *Metrics
}

func newProducer[TTx any](c *Client[TTx], queue string, max int) *producer {
	return &producer{
		client: c, queue: queue, max: max,
		wakeCh: make(chan struct{}, 1), slotCh: make(chan struct{}, 1), stopCh: make(chan struct{}),
		ahead: make(chan *execution, aheadMaxPools*max),
	}
}

// wake asks for a fetch: something may have become claimable, perhaps in
// a key the remembered listing does not hold.
func (p *producer) wake() {
	p.listing.forget()
	signal(p.wakeCh)
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (p *producer) stopFetching() { p.stopOnce.Do(func() { close(p.stopCh) }) }

func (p *producer) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range fetchLoops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.loop(ctx, i == 0)
		}()
	}
	wg.Wait()
	p.drainAhead()
}

// loop fetches until stopped. Only the primary loop fetches a backlog or
// while flow limits exist (see fetchLoops).
func (p *producer) loop(ctx context.Context, primary bool) {
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		want, ok := p.waitForTurn(ctx, poll, primary)
		if !ok {
			return
		}
		res := p.fetch(ctx, want, primary)
		if !p.settle(want, res) {
			resetTimer(poll, nextPoll(p.client.cfg().FetchPollInterval, res.nextIn))
		} else if !primary {
			// Only the primary fetches a backlog, and it may be waiting
			// for a slot or a wake-up that will not come: a wake-up's
			// claim that filled its share, or a sweep of the keys to go
			// on with, found by this loop. The slot signal makes the
			// primary look at the backlog again.
			signal(p.slotCh)
		}
	}
}

// room is how many rows a claim may bring now: free slots, plus buffer space
// while a backlog exists, less what claims in flight will bring. Caller
// holds p.mu.
func (p *producer) room() int {
	free := p.max - int(p.running.Load())
	if p.backlog && !p.slotBound {
		free += p.aheadLimit(time.Now()) - len(p.ahead)
	}
	return free - p.reserved
}

// aheadLimit is how many jobs the buffer may hold now: what the workers
// start in aheadWindow at the measured rate, between one pool and its
// capacity. The rate is sampled here, where fetches decide their size, over
// at least rateSample, and halved toward each new sample so one burst or
// pause does not swing the buffer. Caller holds p.mu.
func (p *producer) aheadLimit(now time.Time) int {
	if d := now.Sub(p.rateAt); d >= rateSample {
		n := p.starts.Load()
		if !p.rateAt.IsZero() {
			p.startRate = (p.startRate + float64(n-p.rateStarts)/d.Seconds()) / 2
		}
		p.rateAt, p.rateStarts = now, n
	}
	return min(max(int(p.startRate*aheadWindow.Seconds()), p.max), cap(p.ahead))
}

// reserve claims room for a fetch of at least need rows: all of it for a
// backlog fetch, which should bring as many rows per commit as it can.
func (p *producer) reserve(need int) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.room(); r >= need {
		p.reserved += r
		return r, true
	}
	return 0, false
}

// reserveWake claims half the room (at least one row) for a fetch woken by
// an insert. A wake-up's claim brings the few rows inserted since the last
// one; had it reserved every free slot, as a backlog fetch does, the
// other loops woken while it is in flight (its commit waiting for the WAL
// flush: milliseconds on a quiet disk, hundreds on a stalled one) would
// find no room and leave their jobs to wait for it and then for one more
// claim, which is the tail fetchLoops exists to avoid. Halving leaves room
// for the next loop however many are in flight; a claim that fills its
// share reports a backlog, and the backlog fetch takes the rest.
func (p *producer) reserveWake() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.room(); r >= 1 {
		r = (r + 1) / 2
		p.reserved += r
		return r, true
	}
	return 0, false
}

// waitForTurn blocks until a fetch is due and reserves its room. With a
// backlog, room for a quarter of the pool is reason to fetch (claims stay
// batched, the buffer keeps slots busy meanwhile); without one, only a
// notification or the poll timer is. The secondary loop listens only to
// notifications, and to nothing while flow limits exist.
func (p *producer) waitForTurn(ctx context.Context, poll *time.Timer, primary bool) (int, bool) {
	threshold := max(1, p.max/4)
	slots, wakes := p.slotCh, p.wakeCh
	if !primary {
		slots = nil
	}
	var retry <-chan time.Time
	p.mu.Lock()
	if d := p.slotRetry; primary && p.wakeOnSlot && d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		retry = t.C
	}
	p.mu.Unlock()
	for {
		p.mu.Lock()
		// After a failed claim the backlog waits for errRetry (the poll
		// timer), not for room: fetching again at once would spin on a
		// database that keeps refusing.
		backlog := p.backlog && p.errRetry == 0
		p.mu.Unlock()
		if backlog && primary {
			if want, ok := p.reserve(threshold); ok {
				return want, !p.stopped()
			}
		}
		if !primary && p.client.limited(ctx) {
			wakes = nil
		} else {
			wakes = p.wakeCh
		}
		select {
		case <-ctx.Done():
			return 0, false
		case <-p.stopCh:
			return 0, false
		case <-wakes:
		case <-poll.C:
			poll.Reset(p.client.cfg().FetchPollInterval)
			if wakes == nil {
				continue
			}
		case <-slots:
			if !p.takeWakeOnSlot() {
				continue
			}
		case <-retry:
			retry = nil
			if !p.takeWakeOnSlot() {
				continue
			}
		}
		// select picks at random among ready cases: a wake-up or the poll
		// may win over a stop that is already under way.
		if p.stopped() {
			return 0, false
		}
		if want, ok := p.reserveWake(); ok {
			return want, true
		}
		p.mu.Lock()
		p.markBacklog() // woken with no room: there is work once room frees
		p.deferredWake = p.reserved > 0
		p.mu.Unlock()
	}
}

// runningFreed is called once ends of keyed jobs are committed: a fetch
// that found its limited keys at their concurrency limit tries again now.
func (p *producer) runningFreed() {
	if p.takeWakeOnSlot() {
		p.wake()
	}
}

// takeWakeOnSlot reports and clears wakeOnSlot.
func (p *producer) takeWakeOnSlot() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.wakeOnSlot
	p.wakeOnSlot = false
	return w
}

func (p *producer) stopped() bool {
	select {
	case <-p.stopCh:
		return true
	default:
		return false
	}
}

// settle releases the fetch's reservation and records what it learned.
// It reports whether a backlog remains (fetch again without waiting).
func (p *producer) settle(want int, res *claimResult) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reserved -= want
	if res.failed {
		// What the last good fetch learned (backlog, cursor, a wait for a
		// slot) still holds; only when to look again changes.
		if p.errRetry == 0 {
			p.errRetry = slotRetryMin
		} else {
			p.errRetry = min(2*p.errRetry, max(slotRetryMin, p.client.cfg().FetchPollInterval))
		}
		res.nextIn = p.errRetry
		if p.deferredWake {
			p.deferredWake = false
			signal(p.wakeCh)
		}
		return false
	}
	p.errRetry = 0
	// The cursor moves only forward: a fetch begun before the one that
	// last moved it listed from an older cursor, and moving back to where
	// it stopped made a sweep meet its first key again before it had
	// listed the keys after them, and end.
	if res.cursor != "" && res.startGen > p.cursorGen {
		p.cursor, p.cursorGen = res.cursor, res.startGen
	}
	// A slot-bound fetch that claimed nothing waits for a job to end (a
	// slot, or a key's running count, frees) rather than fetching again at
	// once, which would spin while every limited key is saturated.
	p.slotBound = res.slotBound
	p.wakeOnSlot = res.slotBound && len(res.rows) == 0
	switch {
	case !p.wakeOnSlot:
		p.slotRetry = 0
	case p.slotRetry == 0:
		p.slotRetry = slotRetryMin
	default:
		p.slotRetry = min(2*p.slotRetry, slotRetryMax)
	}
	// sweeping is asked first, not last in the ||: it also ends a sweep
	// when the fetch claimed something, and left behind a claim that
	// filled its share (res.more), the sweep's stale start made a later
	// fruitless listing that held it look like a finished pass, and the
	// producer waited for the poll with jobs of a key it had not reached.
	sweep := p.sweeping(res)
	switch {
	case len(res.rows) == want || res.more || (res.slotBound && len(res.rows) > 0) || sweep:
		p.markBacklog()
	case res.startGen > p.backlogGen:
		p.backlog = false
	}
	if p.deferredWake {
		p.deferredWake = false
		signal(p.wakeCh)
	}
	return p.backlog
}

// markBacklog records that a backlog exists, as of now (see gen). Caller
// holds p.mu.
func (p *producer) markBacklog() {
	p.backlog = true
	p.gen++
	p.backlogGen = p.gen
}

// sweeping reports whether to fetch again at once because the last fetch
// listed only some of the keys it may claim from (the listing was cut at
// claimWidth): the keys after them may have backlog that no notification
// will announce (held keys, a backlog that outlived its wake-up). A fetch
// that claimed something goes on to the next keys; one that claimed nothing
// (all throttled, paused or empty) starts a fruitless sweep, which stops once
// the listing wraps around to where it began, so keys that are all empty or
// throttled cost one pass, not a busy loop. Caller holds p.mu.
func (p *producer) sweeping(res *claimResult) bool {
	if !res.truncated {
		p.sweepFrom = ""
		return false
	}
	if len(res.rows) > 0 {
		p.sweepFrom = ""
		return true
	}
	if len(res.starved) > 0 {
		// Listed but never tried: no free slot reached them (the fetch
		// waits for one, wakeOnSlot, and tries them then). A sweep begun
		// here would end on that very fetch, whose listing starts at the
		// same key, and the keys after it would wait for the poll.
		return false
	}
	if p.sweepFrom == "" {
		p.sweepFrom = res.keys[0]
		p.gen++
		p.sweepGen = p.gen
		return true
	}
	if res.startGen < p.sweepGen {
		// Listed before the sweep began, from the cursor of then: its
		// keys may be the sweep's first ones again, which is no wrap.
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
		// Early by the hold a claim may spend waiting under the key's lock.
		return max(nextToken-tokenHold, time.Millisecond)
	}
	return poll
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

// fetch claims up to want rows. Limited keys get only free slots, and only
// from the primary loop, so two loops never both count the same free slot
// for them.
func (p *producer) fetch(ctx context.Context, want int, primary bool) *claimResult {
	m := p.client.metricsOf()
	cursor, gen := p.beginFetch()
	start := time.Now()
	free := 0
	if primary {
		free = min(max(0, p.max-int(p.running.Load())), want)
	}
	// A claim is not cancelled by the stop: a statement interrupted in
	// flight may still commit on the server, leaving jobs claimed by an
	// owner that never hears of them until their leases expire. It runs to
	// its end (bounded by a lease), and what a stop finds claimed goes back.
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.client.cfg().LeaseDuration)
	res, err := p.client.claim(claimCtx, p.queue, cursor, free, want, &p.listing)
	cancel()
	m.ClaimLatency.WithLabelValues(p.queue).Observe(time.Since(start).Seconds())
	if err != nil {
		if ctx.Err() == nil {
			p.client.cfg().Logger.Error("claiming jobs", "queue", p.queue, "error", err)
		}
		return &claimResult{failed: true, startGen: gen}
	}
	res.startGen = gen
	m.Claimed.WithLabelValues(p.queue).Add(float64(len(res.rows)))
	if p.stopped() {
		// A claim that was in flight when the stop began: its jobs go back
		// unstarted, like the fetch-ahead buffer's, rather than starting
		// after a hard stop has handed back everything it knew of.
		for _, row := range res.rows {
			p.client.handBack(p.client.register(ctx, row))
		}
		return &claimResult{startGen: gen}
	}
	for _, row := range res.rows {
		exe := p.client.register(ctx, row)
		if p.takeSlot() {
			p.starts.Add(1)
			go p.client.runJobs(p, exe)
		} else {
			p.ahead <- exe // the reservation guarantees space
		}
	}
	return res
}

// beginFetch returns where a fetch's key listing starts and the fetch's
// place in gen.
func (p *producer) beginFetch() (cursor string, gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen++
	return p.cursor, p.gen
}

// idle reports whether no backlog is known and nothing is fetched ahead:
// a job inserted now may start at once without passing jobs that wait.
func (p *producer) idle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.backlog && len(p.ahead) == 0
}

// takeSlot occupies a worker slot if one is free.
func (p *producer) takeSlot() bool {
	for {
		n := p.running.Load()
		if int(n) >= p.max {
			return false
		}
		if p.running.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// next hands a finishing slot the next fetched-ahead job, if any.
func (p *producer) next() *execution {
	if p.stopped() {
		return nil
	}
	select {
	case exe := <-p.ahead:
		p.starts.Add(1)
		signal(p.slotCh) // room in the buffer: maybe time to fetch
		return exe
	default:
		return nil
	}
}

// drainAhead hands back jobs fetched ahead that no slot took: on stop they
// are not started (a soft stop finishes running work, it does not begin any).
func (p *producer) drainAhead() {
	for {
		select {
		case exe := <-p.ahead:
			p.client.handBack(exe)
		default:
			return
		}
	}
}

// done frees a slot.
func (p *producer) done() {
	p.running.Add(-1)
	signal(p.slotCh)
}
