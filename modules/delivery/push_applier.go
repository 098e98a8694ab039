package delivery

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/keelwork/keel"
)

// applier concludes attempts in batches: one statement for every outcome
// that queued up while the previous batch was written, so ACKs cost the
// database a fraction of a statement each under load. It then hands each
// outcome to the worker still waiting for it, or wakes the parked job.
type applier[TTx any] struct {
	st     *store[TTx]
	client func() *keel.Client[TTx]
	log    *slog.Logger
	in     chan queued
	quit   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	// gate counts task items' failures known but not yet settled.
	gate *keyGate
	// wakeRetry are the delays after which a parked job whose wake found
	// it not yet waiting (its JobWait not committed yet) is woken again.
	wakeRetry []time.Duration

	// later holds the retries scheduled by wake and settle, so stop can
	// cancel them: a retry that fired after the module stopped would call
	// an engine whose driver the host has closed.
	tmu     sync.Mutex
	timers  map[*time.Timer]struct{}
	stopped bool
	later   sync.WaitGroup
}

type queued struct {
	a   *attempt
	out outcome
}

// maxApplyBatch bounds one conclusion statement.
const maxApplyBatch = 500

func newApplier[TTx any](st *store[TTx], client func() *keel.Client[TTx], log *slog.Logger) *applier[TTx] {
	return &applier[TTx]{st: st, client: client, log: log, in: make(chan queued, 4096), quit: make(chan struct{}), gate: newKeyGate(),
		timers:    map[*time.Timer]struct{}{},
		wakeRetry: []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}}
}

// conclude queues the outcome of a; later outcomes of the same attempt
// are ignored.
func (p *applier[TTx]) conclude(a *attempt, o outcome) {
	if !a.settle() {
		return
	}
	if a.batch {
		a.holdOutcome(p.gate)
	}
	if !a.holdsSlotFor(o) {
		a.freeSlotOnly()
	}
	o.ID, o.Token = a.recordID, a.token
	if o.Event.Conn == "" {
		o.Event.Conn = a.connID
	}
	select {
	case p.in <- queued{a: a, out: o}:
	case <-p.quit:
		// Stopping: the record stays awaiting_ack and its job concludes
		// it at the deadline.
	}
}

func (p *applier[TTx]) start(ctx context.Context) {
	for range batchers {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.run(ctx)
		}()
	}
}

// stop applies what is queued, cancels the retries not yet due, waits
// for those running, and returns. A cancelled retry loses nothing: its job
// is parked with a deadline (the ACK's, or the connection wait's) and
// reads its record when that comes, on this instance's next start or on
// another's.
func (p *applier[TTx]) stop() {
	p.once.Do(func() { close(p.quit) })
	p.wg.Wait()
	p.tmu.Lock()
	p.stopped = true
	for t := range p.timers {
		if t.Stop() {
			p.later.Done()
		}
	}
	clear(p.timers)
	p.tmu.Unlock()
	p.later.Wait()
}

// after runs f in d unless the applier stops first.
func (p *applier[TTx]) after(d time.Duration, f func()) {
	p.tmu.Lock()
	defer p.tmu.Unlock()
	if p.stopped {
		return
	}
	p.later.Add(1)
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		defer p.later.Done()
		p.tmu.Lock()
		delete(p.timers, t)
		p.tmu.Unlock()
		f()
	})
	p.timers[t] = struct{}{}
}

func (p *applier[TTx]) run(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	for {
		select {
		case first := <-p.in:
			p.apply(ctx, gather(p.in, first, maxApplyBatch))
		case <-p.quit:
			for {
				select {
				case first := <-p.in:
					p.apply(ctx, gather(p.in, first, maxApplyBatch))
				default:
					return
				}
			}
		}
	}
}

func (p *applier[TTx]) apply(ctx context.Context, batch []queued) {
	outs := make([]outcome, len(batch))
	for i, q := range batch {
		outs[i] = q.out
	}
	done, err := p.st.finishMany(ctx, outs)
	if err != nil {
		// The records stay awaiting_ack; their jobs look again at the
		// deadline and conclude them (a timeout, at worst).
		p.log.Error("delivery: concluding attempts", "n", len(batch), "err", err)
		done = map[int64]bool{}
	}
	var wake []int64
	var settle []*attempt
	for _, q := range batch {
		f := finished{status: q.out.Status, class: q.out.Class, err: q.out.Error, applied: done[q.a.recordID]}
		q.a.outcome = f
		parked := q.a.deliver(f)
		switch {
		case parked && q.a.jobID > 0 && q.a.batch && f.applied:
			settle = append(settle, q.a)
		case parked && q.a.jobID > 0:
			wake = append(wake, q.a.jobID)
			q.a.freeSlot()
		case !f.applied:
			// The worker re-reads the record; nothing to count here.
			q.a.freeSlot()
		}
	}
	if len(wake) > 0 {
		p.wake(ctx, wake, 0)
	}
	if len(settle) > 0 {
		p.settle(ctx, settle, 0)
	}
}

// settle ends parked task items by their applied outcome, without a new
// claim: a success completes the item, a failure fails it and counts toward
// its application's auto-pause (in the same transaction), a lost connection
// ends it uncounted. Items not parked yet (their JobWait not committed) are
// tried again; those never settled are woken, and their worker reads the
// record. Window slots held for failures are freed once the settle
// committed, so the write waiting for the slot sees any pause it caused.
func (p *applier[TTx]) settle(ctx context.Context, as []*attempt, try int) {
	c := p.client()
	if c == nil {
		for _, a := range as {
			a.freeSlot()
		}
		return
	}
	items := make([]keel.BatchSettle, len(as))
	for i, a := range as {
		items[i] = settleOf(a)
	}
	applied, err := c.BatchItemsSettle(ctx, items)
	if err != nil {
		p.log.Warn("delivery: settling task items", "n", len(as), "err", err)
	}
	got := make(map[int64]bool, len(applied))
	for _, id := range applied {
		got[id] = true
	}
	var left []*attempt
	for _, a := range as {
		if got[a.jobID] {
			a.freeSlot()
		} else {
			left = append(left, a)
		}
	}
	if len(left) == 0 {
		return
	}
	if try >= len(p.wakeRetry) {
		ids := make([]int64, len(left))
		for i, a := range left {
			ids[i] = a.jobID
			a.freeSlot()
		}
		p.wake(ctx, ids, 0)
		return
	}
	p.after(p.wakeRetry[try], func() { p.settle(ctx, left, try+1) })
}

// settleLater settles an item whose worker received its failure in place:
// the worker parks it (JobWait) and the settle counts the failure once the
// park committed.
func (p *applier[TTx]) settleLater(ctx context.Context, a *attempt) {
	p.after(p.wakeRetry[0], func() { p.settle(context.WithoutCancel(ctx), []*attempt{a}, 1) })
}

func settleOf(a *attempt) keel.BatchSettle {
	f := a.outcome
	if f.status == StatusDelivered {
		res := itemResult{Status: StatusDelivered, Conn: a.connID}
		if a.outer != 0 {
			res.Outer = strconv.FormatUint(a.outer, 10)
		}
		return keel.BatchSettle{ID: a.jobID, Success: true, Result: res}
	}
	return keel.BatchSettle{ID: a.jobID, Err: failure(f.class, f.err), Uncounted: unknownClass(f.class)}
}

// wake makes parked jobs available; ids not yet waiting are tried again.
func (p *applier[TTx]) wake(ctx context.Context, ids []int64, try int) {
	c := p.client()
	if c == nil {
		return
	}
	woken, err := c.JobWake(ctx, &keel.JobWakeParams{IDs: ids})
	if err != nil {
		p.log.Warn("delivery: waking jobs", "n", len(ids), "err", err)
	}
	if try >= len(p.wakeRetry) {
		return
	}
	got := make(map[int64]bool, len(woken))
	for _, id := range woken {
		got[id] = true
	}
	var left []int64
	for _, id := range ids {
		if !got[id] {
			left = append(left, id)
		}
	}
	if len(left) > 0 {
		p.after(p.wakeRetry[try], func() { p.wake(ctx, left, try+1) })
	}
}

// gather takes first and whatever else is already queued on in, up to max:
// a batch is what arrived while the last one was being written, so no
// request waits for a batch to fill.
func gather[T any](in <-chan T, first T, max int) []T {
	batch := []T{first}
	for len(batch) < max {
		select {
		case q := <-in:
			batch = append(batch, q)
		default:
			return batch
		}
	}
	return batch
}
