package delivery

import (
	"context"
	"math"
	"sync"
	"time"
)

// pacer spaces this instance's writes per flow key. The engine's token
// bucket already holds claims to the rate across every instance; the pacer
// keeps the customer's side of it honest too, because the time from claim
// to write varies (a database round trip, a busy window) and two claims a
// full interval apart could otherwise reach the customer closer together.
// Writes of a key are spaced by paceMargin/rate, so a receiver counting any
// one-second window sees at most rate even with a few tens of milliseconds
// of network jitter.
//
// A slot is when a write may start; what runs between the slot and the
// write (a task item's last check reads the database) takes a varying
// time, so the pacer also keeps when each key's last write actually
// started, and turn holds a write until a full interval after it.
type pacer struct {
	mu   sync.Mutex
	next map[string]time.Time
	last map[string]time.Time
}

// paceMargin stretches the interval between writes of a key.
const paceMargin = 1.05

func newPacer() *pacer {
	return &pacer{next: map[string]time.Time{}, last: map[string]time.Time{}}
}

// claimAlign is how long after its claim a rate-limited write goes out.
// Claims of a key are spaced by the engine's token bucket on every
// instance, under the key's lock; writing each at its claim instant plus a
// fixed delay carries that spacing to the customer whichever instance
// writes and however long the claim-to-write path took (as long as it took
// less than this).
const claimAlign = 150 * time.Millisecond

// engineTaskRate is the engine's claim rate for a task's rate: the
// engine's bucket (burst 0) spaces a key's claims exactly 1/rate apart, so
// six writes aligned on their claims span exactly one second, and any
// jitter on the way to the customer (a scheduler delay on one instance, the
// customer's own receive loop) puts six in one of the customer's seconds.
// Claiming paceMargin slower leaves every window of rate writes that
// margin of slack, whichever instance writes each.
func engineTaskRate(rate float64) float64 { return rate / paceMargin }

// shownTaskRate is the rate the operator asked for, from the engine's.
func shownTaskRate(engine float64) float64 { return math.Round(engine * paceMargin) }

// wait blocks until key may write again at rate per second (rate <= 0:
// unlimited), and not before claimed+claimAlign. It reports whether it
// slept: a write that waited re-checks what may have changed meanwhile.
func (p *pacer) wait(ctx context.Context, key string, rate float64, claimed time.Time) (bool, error) {
	if rate <= 0 {
		return false, nil
	}
	gap := paceGap(rate)
	p.mu.Lock()
	t := time.Now()
	at := p.next[key]
	if at.Before(t) {
		at = t
	}
	if l, ok := p.last[key]; ok && at.Before(l.Add(gap)) {
		at = l.Add(gap)
	}
	if aligned := claimed.Add(claimAlign); at.Before(aligned) {
		at = aligned
	}
	p.next[key] = at.Add(gap)
	p.prune(t)
	p.mu.Unlock()
	d := time.Until(at)
	if d <= 0 {
		return false, nil
	}
	if err := sleepCtx(ctx, d); err != nil {
		return false, err
	}
	return true, nil
}

// sleepCtx waits d, or until ctx ends (then its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// paceGap is the least time between two writes of a key at rate.
func paceGap(rate float64) time.Duration {
	return time.Duration(paceMargin * float64(time.Second) / rate)
}

// turn is called right before a write of key: when the key's last write
// started less than an interval ago it returns how long is left, and the
// caller waits that long (checking again what a wait may have changed)
// and asks again; otherwise it records now as the key's last write and
// returns 0. So the writes' own instants, not only their slots, are an
// interval apart, whatever delayed one of them after its slot.
func (p *pacer) turn(key string, rate float64) time.Duration {
	if rate <= 0 {
		return 0
	}
	gap := paceGap(rate)
	p.mu.Lock()
	defer p.mu.Unlock()
	t := time.Now()
	if l, ok := p.last[key]; ok {
		if d := l.Add(gap).Sub(t); d > 0 {
			return d
		}
	}
	p.last[key] = t
	return 0
}

// prune drops keys idle for a minute, so finished tasks leave nothing.
func (p *pacer) prune(t time.Time) {
	if len(p.next) >= 1024 {
		for k, at := range p.next {
			if t.Sub(at) > time.Minute {
				delete(p.next, k)
			}
		}
	}
	if len(p.last) >= 1024 {
		for k, at := range p.last {
			if t.Sub(at) > time.Minute {
				delete(p.last, k)
			}
		}
	}
}
