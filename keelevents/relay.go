package keelevents

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelwork/keel/keelsql"
)

// relay publishes committed outbox rows. The key space is cut into
// partitions, each held by one relay instance at a time under a lease with
// a fence (keel_events_relay_lease); every instance takes its fair share
// of the partitions, so there is no single leader and a dead instance's
// partitions move to the others when its leases expire. Within its
// partitions a relay publishes in emit order, one batch at a time, and
// marks what the bus acknowledged with an UPDATE conditioned on its fence:
// a relay that lost a partition (paused past its lease) cannot mark what
// the new holder owns, and whatever it published meanwhile is a duplicate
// the bus absorbs by (topic, id).
type relay[TTx any] struct {
	e     *Events[TTx]
	owner string
	// mu guards held: the lanes read it and drop what a fence took away,
	// rebalance renews, takes and gives back.
	mu   sync.Mutex
	held map[int]int64 // partition -> fence
	// parked marks the lanes that found nothing at MaxPoll and wait only
	// for a wake: the relay's one probe (probeParked) looks for events of
	// their partitions instead of each lane polling on its own.
	parked []atomic.Bool
}

type leaseRow struct {
	part    int
	owner   string
	fence   int64
	expires time.Time
}

// run keeps the leases and runs Config.RelayLanes lanes, each publishing
// the held partitions p with p mod lanes = its number: a batch's database
// round trips (select, mark) and its publish acknowledgements then overlap
// with the other lanes' instead of following one another. A partition
// always belongs to the same lane, so its events are published by one loop,
// in order.
func (r *relay[TTx]) run(ctx context.Context) {
	cfg := &r.e.cfg
	tick := time.NewTicker(cfg.LeaseTTL / 3)
	defer tick.Stop()
	probe := time.NewTicker(cfg.MaxPoll)
	defer probe.Stop()
	defer r.releaseAll()
	r.rebalance(ctx)
	lanes := max(cfg.RelayLanes, 1)
	r.parked = make([]atomic.Bool, lanes)
	wakes := make([]chan struct{}, lanes)
	probed := make([]chan struct{}, lanes)
	var wg sync.WaitGroup
	defer wg.Wait() // before releaseAll: no lane marks after the release
	for i := range wakes {
		wakes[i] = make(chan struct{}, 1)
		probed[i] = make(chan struct{}, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.lane(ctx, i, lanes, wakes[i], probed[i])
		}()
	}
	kick := func(cs []chan struct{}) {
		for _, c := range cs {
			poke(c)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			r.rebalance(ctx)
			kick(probed) // partitions taken over may have a backlog
		case <-r.e.relayWake:
			kick(wakes)
		case <-r.e.relayLook:
			kick(probed)
		case <-probe.C:
			for _, l := range r.probeParked(ctx, lanes) {
				poke(probed[l])
			}
		}
	}
}

// poke signals c without blocking; a signal already pending is enough.
func poke(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// probeParked looks, in one statement, for unpublished events in the
// partitions of the parked lanes and returns the lanes that have some.
// An idle relay used to poll every lane every MaxPoll, each poll a
// transaction of three statements on PostgreSQL (the plan setting, the
// fetch, the commit): an idle server with the default four lanes ran 160
// statements a second to learn that nothing was pending. The probe keeps
// the same bound, an event nobody woke the relay for is found within
// MaxPoll, at one statement per MaxPoll.
func (r *relay[TTx]) probeParked(ctx context.Context, lanes int) []int {
	var parts []int
	for _, p := range r.laneParts(-1, lanes) {
		if r.parked[p%lanes].Load() {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	e := r.e
	rows, err := e.db.Query(ctx, e.d.sql("OutboxPendingParts"), e.d.ints(parts))
	found, err := keelsql.CollectRows(rows, err, func(rs keelsql.Rows) (int, error) {
		var p int
		return p, rs.Scan(&p)
	})
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Logger.Warn("keelevents: relay probe", "err", err)
		}
		// Unknown: every parked lane looks for itself.
		found = parts
	}
	var out []int
	for _, p := range found {
		if l := p % lanes; !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// lane publishes its partitions' batches back to back while they have
// events, then polls from MinPoll doubling to MaxPoll, woken early by an
// EmitTx or a notification. Once a poll at MaxPoll finds nothing the lane
// parks: it waits for a wake, or for a look (probed): the relay's probe
// found events of its partitions, a notification said an event committed,
// or the lane's partitions changed hands. A wake is EmitTx's, sent before
// its transaction commits, so the lane polls from MinPoll until the
// commit shows, as before parking existed. A look follows a commit: a
// lane that then finds nothing parks again at once. A look is for every
// lane and most have nothing (the events are in another lane's
// partitions, or another relay took them); polling on from MinPoll after
// it, eight polls a lane, was the idle relay's largest cost once the
// probe replaced the lanes' timers.
func (r *relay[TTx]) lane(ctx context.Context, lane, lanes int, wake, probed <-chan struct{}) {
	cfg := &r.e.cfg
	poll := cfg.MinPoll
	timer := time.NewTimer(poll)
	defer timer.Stop()
	for ctx.Err() == nil {
		n, err := r.publishParts(ctx, r.laneParts(lane, lanes))
		if err != nil && ctx.Err() == nil {
			cfg.Logger.Warn("keelevents: relay publish", "err", err)
			poll = cfg.MaxPoll
		} else if n > 0 {
			poll = cfg.MinPoll
			continue
		} else if poll >= cfg.MaxPoll {
			r.parked[lane].Store(true)
			select {
			case <-ctx.Done():
			case <-wake:
				poll = cfg.MinPoll
			case <-probed:
			}
			r.parked[lane].Store(false)
			continue
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(poll)
		select {
		case <-ctx.Done():
		case <-wake:
			poll = cfg.MinPoll
		case <-probed:
		case <-timer.C:
			poll = min(2*poll, cfg.MaxPoll)
		}
	}
}

// laneParts lists the held partitions of one lane (every lane's when lane
// is -1), sorted.
func (r *relay[TTx]) laneParts(lane, lanes int) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var parts []int
	for p := range r.held {
		if lane < 0 || p%lanes == lane {
			parts = append(parts, p)
		}
	}
	slices.Sort(parts)
	return parts
}

// rebalance renews the held leases, then takes or gives back partitions so
// that this instance holds its fair share: ceil(partitions / live relays).
func (r *relay[TTx]) rebalance(ctx context.Context) {
	if err := r.rebalanceErr(ctx); err != nil && ctx.Err() == nil {
		r.e.cfg.Logger.Warn("keelevents: relay leases", "err", err)
	}
}

func (r *relay[TTx]) rebalanceErr(ctx context.Context) error {
	// r.mu guards the held set, never a database round trip. On a busy
	// database (SQLite's one writer connection, shared with every module
	// and the engine) each statement here can wait for the connection,
	// and the lanes, which read the set before every batch, used to wait
	// with the whole rebalance instead of publishing: keel dev under load
	// was seen publishing nothing for minutes. A lane that publishes a
	// partition this rebalance is giving up, or has just lost, is stopped
	// by the fence in OutboxMark, as a lane of a paused relay would be.
	e := r.e
	ttl := e.cfg.LeaseTTL
	defer func() {
		r.mu.Lock()
		e.m.partitionsHeld.Set(float64(len(r.held)))
		r.mu.Unlock()
	}()
	held := r.heldCopy()
	if err := r.renew(ctx, held, now().Add(ttl)); err != nil {
		return err
	}
	at := now()
	if _, err := e.db.Exec(ctx, e.d.sql("InstanceBeat"), r.owner, at); err != nil {
		return fmt.Errorf("announcing the relay: %w", err)
	}
	var live int
	if err := e.db.QueryRow(ctx, e.d.sql("InstanceCount"), at.Add(-ttl)).Scan(&live); err != nil {
		return fmt.Errorf("counting relays: %w", err)
	}
	parts, err := e.partitions(ctx, e.db)
	if err != nil {
		return err
	}
	share := (parts + max(live, 1) - 1) / max(live, 1)
	// Beyond the share, the highest partitions go back: out of the lanes'
	// set first, so that no new batch of them starts, then released.
	for _, p := range slices.Backward(slices.Sorted(maps.Keys(held))) {
		if len(held) <= share {
			break
		}
		f := held[p]
		delete(held, p)
		r.drop(p, f)
		if _, err := e.db.Exec(ctx, e.d.sql("LeaseRelease"), p, r.owner, f, time.Unix(0, 0).UTC()); err != nil {
			return fmt.Errorf("releasing partition %d: %w", p, err)
		}
	}
	if len(held) >= share {
		return nil
	}
	rows, err := e.db.Query(ctx, e.d.sql("LeaseList"))
	leases, err := keelsql.CollectRows(rows, err, func(rs keelsql.Rows) (leaseRow, error) {
		var l leaseRow
		return l, rs.Scan(&l.part, &l.owner, &l.fence, &l.expires)
	})
	if err != nil {
		return fmt.Errorf("reading relay leases: %w", err)
	}
	for _, l := range leases {
		if len(held) >= share {
			break
		}
		if _, mine := held[l.part]; mine || (l.owner != "" && l.expires.After(at)) {
			continue
		}
		var fence int64
		err := e.db.QueryRow(ctx, e.d.sql("LeaseAcquire"), l.part, r.owner, l.fence, at.Add(ttl), at).Scan(&fence)
		if errors.Is(err, keelsql.ErrNoRows) {
			continue // another relay was faster
		}
		if err != nil {
			return fmt.Errorf("taking partition %d: %w", l.part, err)
		}
		held[l.part] = fence
		r.mu.Lock()
		r.held[l.part] = fence
		r.mu.Unlock()
	}
	return nil
}

// renew extends every lease in held in one statement and forgets, in held
// and in r.held, the partitions another relay took while this one was
// away.
func (r *relay[TTx]) renew(ctx context.Context, held map[int]int64, until time.Time) error {
	if len(held) == 0 {
		return nil
	}
	e := r.e
	parts := slices.Sorted(maps.Keys(held))
	fences := make([]int64, len(parts))
	for i, p := range parts {
		fences[i] = held[p]
	}
	rows, err := e.db.Query(ctx, e.d.sql("LeaseRenewMany"), r.owner, e.d.ints(parts), e.d.int64s(fences), until)
	renewed, err := keelsql.CollectRows(rows, err, func(rs keelsql.Rows) (int, error) {
		var p int
		return p, rs.Scan(&p)
	})
	if err != nil {
		return fmt.Errorf("renewing %d partitions: %w", len(parts), err)
	}
	kept := make(map[int]bool, len(renewed))
	for _, p := range renewed {
		kept[p] = true
	}
	for _, p := range parts {
		if !kept[p] {
			r.drop(p, held[p])
			delete(held, p)
		}
	}
	return nil
}

// heldCopy is the held set as of now.
func (r *relay[TTx]) heldCopy() map[int]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.held) // r.held is never nil, so neither is the copy
}

// drop takes partition p out of the lanes' set unless it was taken again
// at another fence meanwhile.
func (r *relay[TTx]) drop(p int, fence int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held[p] == fence {
		delete(r.held, p)
	}
}

// releaseAll gives the partitions back on a clean stop, so the other
// relays need not wait for the leases to expire.
func (r *relay[TTx]) releaseAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e := r.e
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, f := range r.held {
		_, _ = e.db.Exec(ctx, e.d.sql("LeaseRelease"), p, r.owner, f, time.Unix(0, 0).UTC())
	}
	_, _ = e.db.Exec(ctx, e.d.sql("InstancePrune"), r.owner, now().Add(-24*time.Hour))
	r.held = map[int]int64{}
	e.m.partitionsHeld.Set(0)
}

type pendingRow struct {
	seq int64
	Message
}

// publishOnce publishes the next batch of all the held partitions (see
// publishParts).
func (r *relay[TTx]) publishOnce(ctx context.Context) (int, error) {
	r.mu.Lock()
	parts := slices.Sorted(maps.Keys(r.held))
	r.mu.Unlock()
	return r.publishParts(ctx, parts)
}

// publishParts publishes the next batch of parts (held partitions) and
// marks what the bus acknowledged; it returns how many it marked.
func (r *relay[TTx]) publishParts(ctx context.Context, parts []int) (int, error) {
	e := r.e
	if len(parts) == 0 {
		return 0, nil
	}
	pending, err := r.pending(ctx, parts)
	if err != nil {
		return 0, err
	}
	if len(pending) == 0 {
		return 0, nil
	}
	msgs := make([]Message, len(pending))
	for i := range pending {
		msgs[i] = pending[i].Message
	}
	pubCtx, cancel := context.WithTimeout(ctx, e.cfg.PublishTimeout)
	n, perr := e.bus.Publish(pubCtx, msgs)
	cancel()
	n = max(0, min(n, len(msgs)))
	e.m.publishAttempts.Add(float64(min(n+1, len(msgs))))
	if perr != nil && errors.Is(pubCtx.Err(), context.DeadlineExceeded) && !errors.Is(perr, ErrOutcomeUnknown) {
		perr = fmt.Errorf("%w: %w", ErrOutcomeUnknown, perr)
	}
	marked, err := r.mark(ctx, pending[:n])
	if err != nil {
		return marked, err
	}
	if perr != nil && n < len(pending) {
		unknown := 0
		if errors.Is(perr, ErrOutcomeUnknown) {
			unknown = 1
			e.m.unknown.Inc()
		}
		if _, err := e.db.Exec(ctx, e.d.sql("OutboxAttempt"), pending[n].seq, unknown); err != nil {
			return marked, fmt.Errorf("recording a failed publish: %w", err)
		}
		return marked, fmt.Errorf("publishing %s/%s: %w", pending[n].Topic, pending[n].ID, perr)
	}
	return marked, nil
}

// pending reads the next batch of parts.
func (r *relay[TTx]) pending(ctx context.Context, parts []int) ([]pendingRow, error) {
	e := r.e
	var pending []pendingRow
	err := r.planned(ctx, func(q keelsql.Querier) error {
		rows, err := q.Query(ctx, e.d.sql("OutboxPending"), e.d.ints(parts), e.cfg.RelayBatch)
		pending, err = keelsql.CollectRows(rows, err, func(rs keelsql.Rows) (pendingRow, error) {
			m, err := scanMessageSeq(rs)
			return pendingRow{m.seq, m.Message}, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading pending events: %w", err)
	}
	return pending, nil
}

// planned runs the relay's statement f on the outbox. On PostgreSQL it runs
// in a transaction of its own so that RelayPlan's plan settings apply to
// that statement alone (they end with the transaction): a fetch or a mark
// then costs its batch, not the backlog, whatever the table's statistics.
func (r *relay[TTx]) planned(ctx context.Context, f func(q keelsql.Querier) error) error {
	e := r.e
	if !e.d.pg {
		return f(e.db)
	}
	return e.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		if _, err := tx.Exec(ctx, e.d.sql("RelayPlan")); err != nil {
			return err
		}
		return f(tx)
	})
}

// mark records rows as published in one statement, fenced by the leases:
// a row of a partition another relay took since is not marked, and the
// partition is dropped from this relay's set.
func (r *relay[TTx]) mark(ctx context.Context, rows []pendingRow) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	e := r.e
	parts, err := e.partitions(ctx, e.db)
	if err != nil {
		return 0, err
	}
	fences := make([]int64, parts)
	r.mu.Lock()
	for p, f := range r.held {
		if p < parts {
			fences[p] = f
		}
	}
	r.mu.Unlock()
	seqs := make([]int64, len(rows))
	want := map[int]int{}
	for i, p := range rows {
		seqs[i] = p.seq
		want[p.Partition]++
	}
	var got []int
	err = r.planned(ctx, func(q keelsql.Querier) error {
		res, err := q.Query(ctx, e.d.sql("OutboxMark"), now(), e.d.int64s(seqs), r.owner, e.d.int64s(fences))
		got, err = keelsql.CollectRows(res, err, func(rs keelsql.Rows) (int, error) {
			var p int
			return p, rs.Scan(&p)
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("marking %d events published: %w", len(rows), err)
	}
	for _, p := range got {
		want[p]--
	}
	r.mu.Lock()
	for p, missing := range want {
		if missing > 0 && r.held[p] == fences[p] {
			// The fence moved: another relay holds the partition now.
			delete(r.held, p)
			e.m.fencedMarks.Inc()
		}
	}
	r.mu.Unlock()
	e.m.published.Add(float64(len(got)))
	return len(got), nil
}
