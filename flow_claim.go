package keel

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// claimResult is one fetch: the jobs, whether more are probably waiting
// (some key filled its share), and when a rate-limited key gets its next
// token (0 = not rate bound).
type claimResult struct {
	rows   []*keeltype.JobRow
	more   bool
	nextIn time.Duration
	// failed says the claim did not run to its end (an error): nothing
	// else in the result is known.
	failed bool
	// keys were listed; truncated says the listing hit its limit, so keys
	// beyond them may have backlog too.
	keys      []string
	truncated bool
	// cursor is where the next fetch's key listing should start.
	cursor string
	// slotBound says limited keys had work this fetch could not take for
	// want of free worker slots: a backlog that only freed slots, not
	// buffer space, can serve (limited jobs start when claimed).
	slotBound bool
	// starved are the limited keys listed but given nothing because the
	// free slots ran out before their turn: the cursor stops before the
	// first of them, so the next fetch serves them first.
	starved map[string]bool
	// startGen is the producer's gen when the fetch began (producer.gen).
	startGen uint64
}

// claim fetches up to max jobs of queue, fairly across flow keys: it lists
// keys with backlog (rotating from where the last fetch stopped), gives each
// a weighted share, claims unlimited keys in one statement and limited keys
// under their row locks, where tokens, concurrency and breaker state are
// read and taken in the same transaction as the claim.
//
// max counts worker slots that are free now plus room in the fetch-ahead
// buffer; free counts only the slots. Limited keys are claimed within free:
// a job of a limited key must start when it is claimed, or a breaker, an
// auto-pause or a rate would govern claims but not starts.
//
// listing, if not nil, is the producer's remembered key listing: reused
// instead of listing when fresh, and kept or forgotten by what this claim
// found (keyListing).
func (c *Client[TTx]) claim(ctx context.Context, queue, cursor string, free, max int, listing *keyListing) (*claimResult, error) {
	fx := flowExec(c.driver.Executor())
	width := claimWidth(max)
	// listed is every key with backlog when complete, else the first of
	// them from the cursor on; keys are the ones this claim serves.
	now := time.Now()
	listed, listedAt, gen := listing.reuse(now)
	complete := listed != nil
	var keys []string
	if complete {
		keys = rotateListing(listed, cursor, width)
	} else {
		listedAt = now
		limit := width
		wide := max >= wideListingRows && listing.wideWorth(listedAt)
		if wide {
			limit = keysPerClaimMax
		}
		var err error
		if listed, err = c.claimableKeys(ctx, fx, queue, cursor, limit); err != nil || len(listed) == 0 {
			return &claimResult{}, err
		}
		complete = len(listed) < limit
		if wide && !complete {
			listing.wideFailed(listedAt)
		}
		keys = listed[:min(width, len(listed))]
	}
	limits, err := c.limits.get(ctx)
	if err != nil {
		return nil, err
	}
	if limits, err = c.batchLimitsFresh(ctx, keys, queue, limits); err != nil {
		return nil, err
	}
	res := &claimResult{keys: keys, truncated: !complete || len(listed) > len(keys), cursor: keys[len(keys)-1]}
	shares := shareOut(keys, max, func(k string) int { return weightOf(limits.match(k, queue)) })
	var open, gated []string
	for _, k := range keys {
		if limits.match(k, queue).Gated() {
			gated = append(gated, k)
		} else {
			open = append(open, k)
		}
	}
	// Limited keys first, so their rows take the free slots.
	if len(gated) > 0 {
		if free == 0 {
			res.slotBound = true
			res.starved = map[string]bool{}
			for _, k := range gated {
				res.starved[k] = true
			}
		} else if err := c.claimGated(ctx, queue, gated, shares, free, limits, res); err != nil {
			return nil, err
		}
	}
	allFilled := false
	if len(open) > 0 {
		if allFilled, err = c.claimOpen(ctx, fx, queue, open, shares, res); err != nil {
			return nil, err
		}
	}
	if complete && allFilled && len(gated) == 0 && c.config.Queues[queue].FlowKeys == nil {
		listing.keep(listed, listedAt, gen)
	} else {
		listing.forget()
	}
	// The listing may hold more keys than the free slots serve (it is sized
	// by slots plus buffer). Moving the cursor past keys that got nothing
	// for want of a slot would skip them every time the step and the
	// number of keys share a divisor: ten keys listed five at a time into
	// one slot served two of them, turn and turn about, while eight waited.
	for i, k := range keys {
		if res.starved[k] {
			res.cursor = cursor
			if i > 0 {
				res.cursor = keys[i-1]
			}
			break
		}
	}
	return res, nil
}

// claimableKeys lists up to limit keys to claim from, rotating from
// cursor: keys with backlog, or, when the queue restricts this client to a
// set of keys (QueueConfig.FlowKeys), that set. The set is used as given
// rather than intersected with the backlog: a key without backlog costs one
// empty index probe in the claim, and the set is what this instance holds
// (connections, say), so it is small.
func (c *Client[TTx]) claimableKeys(ctx context.Context, fx keeldriver.FlowExecutor, queue, cursor string, limit int) ([]string, error) {
	held := c.config.Queues[queue].FlowKeys
	if held == nil {
		return fx.FlowKeysAvailable(ctx, &keeldriver.FlowKeysAvailableParams{Queue: queue, After: cursor, Limit: limit})
	}
	return rotateKeys(held(), cursor, limit), nil
}

// rotateListing is rotateKeys for a remembered listing: jobs without a
// key ("") come first, as FlowKeysAvailable lists them.
func rotateListing(keys []string, cursor string, limit int) []string {
	if len(keys) > 0 && keys[0] == "" {
		return append([]string{""}, rotateKeys(keys[1:], cursor, limit-1)...)
	}
	return rotateKeys(keys, cursor, limit)
}

// rotateKeys sorts keys and returns up to limit of them, starting after
// cursor and wrapping around, without duplicates.
func rotateKeys(keys []string, cursor string, limit int) []string {
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	start, _ := slices.BinarySearch(keys, cursor)
	if start < len(keys) && keys[start] == cursor {
		start++
	}
	out := make([]string, 0, min(limit, len(keys)))
	for i := 0; i < len(keys) && len(out) < limit; i++ {
		out = append(out, keys[(start+i)%len(keys)])
	}
	return out
}

func weightOf(l *keeltype.FlowLimit) int {
	if l == nil || l.Weight < 1 {
		return 1
	}
	return l.Weight
}

// shareOut splits max claims across keys in proportion to their weights,
// each key getting at least one while claims last; the total never exceeds
// max (it is the number of free worker slots).
func shareOut(keys []string, budget int, weight func(string) int) map[string]int {
	if len(keys) > budget {
		keys = keys[:budget]
	}
	total := 0
	w := make([]int, len(keys))
	for i, k := range keys {
		w[i] = weight(k)
		total += w[i]
	}
	shares := make(map[string]int, len(keys))
	sum := 0
	for i, k := range keys {
		shares[k] = max(1, budget*w[i]/total)
		sum += shares[k]
	}
	for i := 0; sum > budget; i = (i + 1) % len(keys) {
		if shares[keys[i]] > 1 {
			shares[keys[i]]--
			sum--
		}
	}
	for i := 0; sum < budget; i = (i + 1) % len(keys) {
		shares[keys[i]]++
		sum++
	}
	return shares
}

// claimOpen claims the unlimited keys in one statement; all reports
// whether every key filled its share.
func (c *Client[TTx]) claimOpen(ctx context.Context, fx keeldriver.FlowExecutor, queue string, keys []string, shares map[string]int, res *claimResult) (all bool, err error) {
	ns := make([]int, len(keys))
	for i, k := range keys {
		ns[i] = shares[k]
	}
	rows, err := fx.JobClaimKeys(ctx, &keeldriver.JobClaimKeysParams{Queue: queue, Owner: c.config.ID,
		LeaseDuration: c.config.LeaseDuration, Keys: keys, Ns: ns})
	if err != nil {
		return false, fmt.Errorf("claiming: %w", err)
	}
	res.rows = append(res.rows, rows...)
	some, all := filledShare(rows, keys, ns)
	res.more = res.more || some
	return all, nil
}

// filledShare reports whether some key, and whether every key, got its
// whole share (a key given no share counts as filled: it was not tried,
// and was listed, so it has backlog).
func filledShare(rows []*keeltype.JobRow, keys []string, ns []int) (some, all bool) {
	got := map[string]int{}
	for _, r := range rows {
		got[r.FlowKey]++
	}
	all = true
	for i, k := range keys {
		if got[k] >= ns[i] {
			some = true
		} else {
			all = false
		}
	}
	return some, all
}

// claimGated claims limited keys inside one transaction holding their rows:
// no other instance can take the same tokens or exceed the same concurrency
// limit in between.
func (c *Client[TTx]) claimGated(ctx context.Context, queue string, keys []string, shares map[string]int, free int, limits *limitSet, res *claimResult) error {
	tx, err := c.driver.Executor().Begin(ctx)
	if err != nil {
		return fmt.Errorf("beginning gated claim: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	fx := flowExec(tx)
	locked, err := fx.FlowKeysLock(ctx, &keeldriver.FlowKeysLockParams{Keys: keys, SkipLocked: true})
	if err != nil {
		return fmt.Errorf("locking flow keys: %w", err)
	}
	if len(locked) < len(keys) {
		noteSkipped(keys, locked, limits, queue, res)
	}
	// Rows come back in key order (the lock order, which keeps claimers of
	// overlapping sets from deadlocking); the free slots go in the
	// listing's order, which starts after the cursor and may wrap around.
	turn := make(map[string]int, len(keys))
	for i, k := range keys {
		turn[k] = i
	}
	slices.SortFunc(locked, func(a, b *keeltype.FlowKeyRow) int { return turn[a.Key] - turn[b.Key] })
	// The claim instant is taken under the keys' locks, so the token math
	// and the recorded claim time are the same instant.
	now := time.Now().UTC()
	plan := c.planGated(queue, locked, shares, free, limits, now, res)
	if wait := res.nextIn; wait > 0 && wait <= tokenHold && len(locked) == len(keys) {
		// A token is due within a moment: wait for it holding the keys, so
		// the claim lands on the token's instant instead of a poll later.
		// Producers wake tokenHold early for exactly this.
		time.Sleep(wait)
		now = time.Now().UTC()
		res.nextIn = 0
		plan = c.planGated(queue, locked, shares, free, limits, now, res)
	}
	// The plan gives the free slots to keys in turn, but it cannot know
	// which keys have jobs: a slot planned for a key that turns out empty
	// goes to the next key that got none, in the same transaction, so empty
	// keys ahead in the turn neither waste the slots nor hold the cursor
	// back one key per fetch.
	var claimed []*keeltype.JobRow
	bound := plan.bound
	for left := free; len(plan.keys) > 0; {
		rows, err := fx.JobClaimKeys(ctx, &keeldriver.JobClaimKeysParams{Queue: queue, Owner: c.config.ID,
			LeaseDuration: c.config.LeaseDuration, Keys: plan.keys, Ns: plan.ns, Now: &now})
		if err != nil {
			return fmt.Errorf("claiming limited keys: %w", err)
		}
		claimed = append(claimed, rows...)
		some, _ := filledShare(rows, plan.keys, plan.ns)
		res.more = res.more || some
		left -= len(rows)
		if left <= 0 || len(res.starved) == 0 {
			break
		}
		var next []*keeltype.FlowKeyRow
		for _, k := range locked {
			if res.starved[k.Key] {
				next = append(next, k)
			}
		}
		plan = c.replanGated(queue, next, shares, left, limits, now, res)
		bound = bound || plan.bound
	}
	res.slotBound = res.slotBound || bound || len(res.starved) > 0
	settle(locked, claimed, limits, queue)
	res.rows = append(res.rows, claimed...)
	if err := fx.FlowKeysSave(ctx, locked, &now); err != nil {
		return fmt.Errorf("saving flow keys: %w", err)
	}
	return tx.Commit(ctx)
}

// A claim serves one flow key per rowsPerKey rows it may bring, at least
// keysPerClaim and at most keysPerClaimMax keys (never more than the rows).
// Each key costs an index descent in the claim statement, so spreading a
// claim of 300 rows over 100 keys cost a third of the throughput; but a
// fixed 16 keys capped a claim over keys with few jobs each: 10,000 keys of
// ten jobs gave claims of 160 rows while the fetch-ahead buffer had room
// for ten times that, and drained at 69% of no keys, against 85% with the
// width following the room (docs/benchmarks.md). The rotating cursor serves
// the keys after them next.
const (
	keysPerClaim    = 16
	keysPerClaimMax = 128
	rowsPerKey      = 16
)

// claimWidth is how many keys a claim of up to want rows lists.
func claimWidth(want int) int {
	return min(want, max(keysPerClaim, min(want/rowsPerKey, keysPerClaimMax)))
}

// skippedRetry is how soon to look again at a key another claimer held when
// the key has no rate to predict its next turn from.
const skippedRetry = 25 * time.Millisecond

// noteSkipped schedules a look at keys another instance held for its claim.
// That claimer takes the key's current token, so the next one is about one
// token period away: waking then keeps every instance on the key's cadence
// without hammering the lock in between.
func noteSkipped(keys []string, locked []*keeltype.FlowKeyRow, limits *limitSet, queue string, res *claimResult) {
	held := map[string]bool{}
	for _, k := range locked {
		held[k.Key] = true
	}
	for _, k := range keys {
		if held[k] {
			continue
		}
		wait := skippedRetry
		if l := limits.match(k, queue); l != nil && l.Rate > 0 {
			wait = time.Duration(float64(time.Second) / l.Rate)
		}
		if res.nextIn == 0 || wait < res.nextIn {
			res.nextIn = wait
		}
	}
}

// tokenHold is how long a claim holding a key's lock may wait for a token
// that is about to be due; producers wake that much early. With burst 0,
// every millisecond a claim lands late is a millisecond of rate lost for
// good (claims must stay 1/rate apart), so precision here is throughput.
const tokenHold = 10 * time.Millisecond

type gatedPlan struct {
	keys []string
	ns   []int
	// bound: a key was held back by its concurrency limit, or got part of
	// its share for want of free slots (a job ending frees either).
	bound bool
}

// replanGated is planGated for the slots that keys found empty left over,
// among the keys the first plan starved; their tokens and counts are as
// the first plan read them (they were given nothing), and the throttle
// metrics were counted once already.
func (c *Client[TTx]) replanGated(queue string, starved []*keeltype.FlowKeyRow, shares map[string]int, free int, limits *limitSet, now time.Time, res *claimResult) gatedPlan {
	return c.plan(queue, starved, shares, free, limits, now, res, false)
}

func (c *Client[TTx]) planGated(queue string, locked []*keeltype.FlowKeyRow, shares map[string]int, free int, limits *limitSet, now time.Time, res *claimResult) gatedPlan {
	return c.plan(queue, locked, shares, free, limits, now, res, true)
}

func (c *Client[TTx]) plan(queue string, locked []*keeltype.FlowKeyRow, shares map[string]int, free int, limits *limitSet, now time.Time, res *claimResult, count bool) gatedPlan {
	var plan gatedPlan
	res.starved = nil // a second plan (after a token wait) replaces the first
	for _, k := range locked {
		l := limits.match(k.Key, queue)
		allowed, wait := allowance(l, k, now)
		if free == 0 && allowed > 0 && shares[k.Key] > 0 {
			if res.starved == nil {
				res.starved = map[string]bool{}
			}
			res.starved[k.Key] = true
		}
		n := min(allowed, shares[k.Key], free)
		switch {
		case free > 0 && allowed < min(shares[k.Key], free) && wait > 0:
			// The key's rate held it back: its next token is worth
			// waking for.
			if res.nextIn == 0 || wait < res.nextIn {
				res.nextIn = wait
			}
		case free > 0 && allowed < min(shares[k.Key], free) && l.MaxRunning > 0 && k.Running+allowed >= l.MaxRunning:
			// Its concurrency limit held it back: a job ending frees it.
			plan.bound = true
		case n > 0 && n < shares[k.Key] && allowed > n:
			plan.bound = true // part of its share: the slots ran out
		}
		free -= n
		if count && n < shares[k.Key] {
			c.metrics.Throttled.WithLabelValues(k.Key).Inc()
			c.metrics.TokenWait.WithLabelValues(k.Key).Add(wait.Seconds())
		}
		if n > 0 {
			plan.keys, plan.ns = append(plan.keys, k.Key), append(plan.ns, n)
		}
	}
	return plan
}

// settle takes what was actually claimed (possibly less than planned) from
// each key's tokens and probes.
func settle(locked []*keeltype.FlowKeyRow, rows []*keeltype.JobRow, limits *limitSet, queue string) {
	got := map[string]int{}
	for _, r := range rows {
		got[r.FlowKey]++
	}
	for _, k := range locked {
		if n := got[k.Key]; n > 0 {
			take(limits.match(k.Key, queue), k, n)
		}
	}
}
