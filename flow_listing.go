package keel

import (
	"slices"
	"sync"
	"time"
)

const (
	// keyListingTTL bounds how long a claim may reuse the key listing of
	// the claim before it (keyListing).
	keyListingTTL = 100 * time.Millisecond
	// wideListingRows: a claim with room for this many rows lists up to
	// keysPerClaimMax keys, not just the ones it serves, so that a queue
	// with fewer keys than that gets a complete listing to reuse. Below
	// it (a wake-up's few rows) the extra probes would cost more than
	// the claim.
	wideListingRows = rowsPerKey * keysPerClaim
	// wideRetry: after a wide listing found more keys than it could
	// hold, claims list only what they serve for this long (with
	// thousands of keys no listing is ever complete, and its extra probes
	// would be spent on every claim for nothing).
	wideRetry = time.Second
)

// keyListing lets a backlog claim skip listing the keys with backlog when
// the claim before it found nothing new to learn: every listed key filled
// its share (so each probably has rows left), the listing held every key
// with backlog (not truncated), and no key was limited. Listing is one
// index probe per key, about 0.7 ms for 100 keys on a 2-core machine, in
// front of every claim, which is most of what 100 keys cost a drain.
//
// The listing only chooses which keys a claim tries: the claim statement
// checks pauses, breakers and batches itself, so a reused listing can
// serve a key late, never wrongly. What it could miss is a key that got
// backlog since: a wake-up (an insert, a promotion, a hand-back announced
// to this instance) forgets the listing, a key that comes back short
// forgets it, and it lives keyListingTTL at most.
type keyListing struct {
	mu   sync.Mutex
	keys []string // sorted
	at   time.Time
	// wideAt is when a wide listing last came back truncated.
	wideAt time.Time
	// ttl, if set, replaces keyListingTTL (tests on a loaded machine,
	// where one claim can outlast 100 ms).
	ttl time.Duration
	// gen counts forgets: a claim keeps its listing only if none happened
	// since it began, or a claim that listed before a wake-up could keep
	// a listing without the key the wake-up announced.
	gen uint64
}

// wideWorth reports whether a wide listing may be complete.
func (l *keyListing) wideWorth(now time.Time) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wideAt.IsZero() || now.Sub(l.wideAt) >= wideRetry
}

func (l *keyListing) wideFailed(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wideAt = now
}

// reuse returns the remembered keys and when they were listed if they
// are fresh, else nil; and gen, for keep.
func (l *keyListing) reuse(now time.Time) ([]string, time.Time, uint64) {
	if l == nil {
		return nil, time.Time{}, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ttl := l.ttl
	if ttl == 0 {
		ttl = keyListingTTL
	}
	if l.keys == nil || now.Sub(l.at) >= ttl {
		l.keys = nil
		return nil, time.Time{}, l.gen
	}
	return l.keys, l.at, l.gen
}

// keep remembers keys listed at listedAt by a claim that began at gen
// (from reuse), unless something was forgotten since; a reused listing
// keeps its first time, so reuse never extends a listing's life.
func (l *keyListing) keep(keys []string, listedAt time.Time, gen uint64) {
	if l == nil {
		return
	}
	keys = slices.Sorted(slices.Values(keys))
	l.mu.Lock()
	defer l.mu.Unlock()
	if gen == l.gen {
		l.keys, l.at = keys, listedAt
	}
}

func (l *keyListing) forget() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = nil
	l.gen++
}
