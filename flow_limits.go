package keel

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// limitCacheTTL bounds how stale this instance's view of flow limits may be.
// Limit changes also notify every instance, so in practice they apply at
// once; the TTL covers a lost notification. Pause and breaker state are never
// cached: the claim reads them inside its transaction.
const limitCacheTTL = time.Second

// limitSet is a snapshot of configured limits with most-specific matching.
type limitSet struct {
	exact    map[string][]*keeltype.FlowLimit // pattern → limits (by queue)
	prefixes []*keeltype.FlowLimit            // longest prefix first
}

func newLimitSet(limits []*keeltype.FlowLimit) *limitSet {
	s := &limitSet{exact: map[string][]*keeltype.FlowLimit{}}
	for _, l := range limits {
		if strings.HasSuffix(l.Pattern, "*") {
			s.prefixes = append(s.prefixes, l)
		} else {
			s.exact[l.Pattern] = append(s.exact[l.Pattern], l)
		}
	}
	sortByPrefixLength(s.prefixes)
	return s
}

func sortByPrefixLength(ls []*keeltype.FlowLimit) {
	for i := 1; i < len(ls); i++ {
		for j := i; j > 0 && len(ls[j].Pattern) > len(ls[j-1].Pattern); j-- {
			ls[j], ls[j-1] = ls[j-1], ls[j]
		}
	}
}

// match returns the most specific limit for key in queue: an exact pattern
// beats a prefix, a longer prefix beats a shorter one, and at equal
// specificity a queue-specific limit beats an any-queue one. Nil = none.
func (s *limitSet) match(key, queue string) *keeltype.FlowLimit {
	if key == "" || s == nil {
		return nil
	}
	if l := pickQueue(s.exact[key], queue); l != nil {
		return l
	}
	for i := 0; i < len(s.prefixes); {
		j := i
		for j < len(s.prefixes) && len(s.prefixes[j].Pattern) == len(s.prefixes[i].Pattern) {
			j++
		}
		var same []*keeltype.FlowLimit
		for _, l := range s.prefixes[i:j] {
			if strings.HasPrefix(key, strings.TrimSuffix(l.Pattern, "*")) {
				same = append(same, l)
			}
		}
		if l := pickQueue(same, queue); l != nil {
			return l
		}
		i = j
	}
	return nil
}

func pickQueue(ls []*keeltype.FlowLimit, queue string) *keeltype.FlowLimit {
	var any *keeltype.FlowLimit
	for _, l := range ls {
		switch l.Queue {
		case queue:
			return l
		case "":
			any = l
		}
	}
	return any
}

// limitCache refreshes the limit set at most every limitCacheTTL.
//
// The mutex is never held across the load: callers include transactions
// that already hold a pool connection (a claim, a batch settle, a
// completion), and a load needs another. With the lock held through it,
// a full pool deadlocked: the loader waited for a connection that the
// transactions queued behind the lock would never give back. Now one
// caller refreshes while the others keep the last set (at most a refresh
// stale, as the TTL already allows), so the only second connection asked
// for at a time is the refresher's.
type limitCache struct {
	mu      sync.Mutex
	set     *limitSet
	fetched time.Time
	loading int    // refreshes under way; others serve set meanwhile
	gen     uint64 // bumped by invalidate: a load begun before is stale on arrival
	load    func(ctx context.Context) ([]*keeltype.FlowLimit, error)
}

func (c *limitCache) get(ctx context.Context) (*limitSet, error) {
	c.mu.Lock()
	if c.set != nil && (c.loading > 0 || time.Since(c.fetched) < limitCacheTTL) {
		set := c.set
		c.mu.Unlock()
		return set, nil
	}
	c.mu.Unlock()
	return c.refresh(ctx)
}

// fresh loads the limits now, whatever the cache holds: for a caller that
// knows a limit it needs was created after the last load.
func (c *limitCache) fresh(ctx context.Context) (*limitSet, error) { return c.refresh(ctx) }

func (c *limitCache) refresh(ctx context.Context) (*limitSet, error) {
	c.mu.Lock()
	gen := c.gen
	c.loading++
	c.mu.Unlock()
	limits, err := c.load(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loading--
	if err != nil {
		if c.set != nil {
			return c.set, nil // keep serving the last known limits
		}
		return nil, err
	}
	c.set = newLimitSet(limits)
	if gen == c.gen {
		c.fetched = time.Now()
	} else {
		c.fetched = time.Time{} // invalidated while loading: the next get loads again
	}
	return c.set, nil
}

func (c *limitCache) invalidate() {
	c.mu.Lock()
	c.fetched = time.Time{}
	c.gen++
	c.mu.Unlock()
}

func flowExec(ex keeldriver.Executor) keeldriver.FlowExecutor {
	return ex.(keeldriver.FlowExecutor)
}

// limited reports whether any flow limit is configured (a stale answer for
// up to limitCacheTTL only delays which fetch loop serves a wake-up).
func (c *Client[TTx]) limited(ctx context.Context) bool {
	set, err := c.limits.get(ctx)
	return err != nil || len(set.exact) > 0 || len(set.prefixes) > 0
}
