package inventory

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module/groupcommit"
	"github.com/keelwork/keel/modules/inventory/domain"
	"github.com/keelwork/keel/modules/inventory/store"
)

// coalescer merges concurrent reservations into batches: a reservation
// joins the lane of its (warehouse, SKU) — a pair always has the same
// lane, so its requests keep their arrival order — and the first caller
// to find the lane idle leads it: it takes every request waiting (up to a
// bound), of one pair or many, and runs one transaction with one
// statement per kind of row. The keys are recorded together; one
// conditional UPDATE grants, per pair, the requests whose running total
// fits the available quantity in arrival order; the granted requests'
// reservations, ledger rows (each at its own stock version), outbox events
// and history, and the short requests' failed reservations, are each one
// multi-row INSERT. A flash sale then costs a commit per batch, not a lock
// hand-off per request, and requests spread over many SKUs share commits
// too. Lanes run in parallel (on SQLite, with its one writer, there is one).
type coalescer[TTx any] struct {
	fallbacks atomic.Int64 // the group counts the rest of CoalesceStats
	m         *Module[TTx]
	g         *groupcommit.Group[*coRequest]
}

// CoalesceStats counts the coalescer's work.
type CoalesceStats struct {
	Lanes     int   `json:"lanes"`     // batches that may run at once
	Batches   int64 `json:"batches"`   // transactions run
	Requests  int64 `json:"requests"`  // requests they carried
	Largest   int   `json:"largest"`   // most requests in one
	Fallbacks int64 `json:"fallbacks"` // requests run on their own after a failed batch
}

func (c *coalescer[TTx]) snapshot() CoalesceStats {
	g := c.g.Stats()
	return CoalesceStats{Lanes: g.Lanes, Batches: g.Batches, Requests: g.Requests, Largest: g.Largest, Fallbacks: c.fallbacks.Load()}
}

type coRequest struct {
	req  ReserveRequest
	ctx  context.Context
	done chan coResult
}

type coResult struct {
	res      Result
	err      error
	fallback bool // run the request on its own (its batch failed, or its pair is unknown)
}

func newCoalescer[TTx any](m *Module[TTx], most, lanes int) *coalescer[TTx] {
	c := &coalescer[TTx]{m: m}
	c.g = groupcommit.New(groupcommit.Config[*coRequest]{
		Lanes: lanes,
		Max:   most,
		Lane:  func(r *coRequest) string { return StockKey(r.req.Warehouse, r.req.SKU) },
		// A second request of an order line waits for the next batch,
		// where it is a replay.
		Key: func(r *coRequest) string { return r.req.OrderLine },
		Run: c.run,
		// Led on the submitter's goroutine, which would only wait for its
		// answer otherwise: a burst of reservations starts no goroutine.
		// The leader returns (and sees its ctx) only once the lane is
		// empty, which the burst's end brings.
		Spawn: false,
	})
	return c
}

func (c *coalescer[TTx]) reserve(ctx context.Context, req ReserveRequest) (Result, error) {
	r := &coRequest{req: req, ctx: ctx, done: make(chan coResult, 1)}
	c.g.Submit(r)
	select {
	case out := <-r.done:
		if out.fallback {
			return c.m.reservePlain(ctx, req)
		}
		return out.res, out.err
	case <-ctx.Done():
		// The batch may still commit: a replay of the key tells.
		return Result{}, ctx.Err()
	}
}

// run executes one batch and answers its requests; it returns the
// positions of those that neither got stock nor are short of it (a larger
// request before them did not fit): they go first in the next batch.
func (c *coalescer[TTx]) run(batch []*coRequest) (again []int) {
	m := c.m
	ctx := context.WithoutCancel(batch[0].ctx)
	outs := make([]coResult, len(batch))
	var retry []int
	asked := time.Now()
	// A batch's requests were admitted: it waits for its slot as long as
	// it takes (the lanes are fewer than the slots unless configured
	// otherwise), and the wait is their pool wait.
	slot, err := m.reserveSlot(ctx, -1)
	if err != nil {
		for _, r := range batch {
			r.done <- coResult{err: err}
		}
		return nil
	}
	defer slot()
	err = m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		held := time.Now()
		for _, r := range batch {
			waited(r.ctx, asked, held)
		}
		retry = retry[:0]
		for i := range outs {
			outs[i] = coResult{}
		}
		var err error
		retry, err = c.runTx(ctx, tx, batch, outs)
		return err
	})
	if err != nil {
		// Each request runs on its own, where its error (a reused key, an
		// unknown pair) is its own and not its batch's.
		c.fallbacks.Add(int64(len(batch)))
		for _, r := range batch {
			r.done <- coResult{err: err, fallback: true}
		}
		return nil
	}
	isRetry := make(map[int]bool, len(retry))
	for _, i := range retry {
		isRetry[i] = true
	}
	for i, r := range batch {
		if !isRetry[i] {
			r.done <- outs[i]
		}
	}
	return retry
}

// pairBatch is one pair's fresh requests in a batch, in arrival order.
type pairBatch struct {
	wh, sku string
	idx     []int // into the batch
	cum     []int64
}

// runTx is the batch's transaction: it fills outs and returns the
// requests to retry in the next batch.
func (c *coalescer[TTx]) runTx(ctx context.Context, tx keelsql.Tx[TTx], batch []*coRequest, outs []coResult) ([]int, error) {
	m := c.m
	now := m.now()
	keys, params := make([]string, len(batch)), make([]string, len(batch))
	for i, r := range batch {
		keys[i], params[i] = reserveKey(r.req.OrderLine), r.req.params()
	}
	claimed, err := m.st.ClaimActions(ctx, tx, keys, params, now)
	if err != nil {
		return nil, err
	}
	var giveBack []string // claimed keys of requests not answered here
	var retry []int
	// Replays: keys recorded before (by an earlier request or another
	// process) answer with their first result.
	if len(claimed) < len(batch) {
		var old []string
		for _, k := range keys {
			if !claimed[k] {
				old = append(old, k)
			}
		}
		acts, err := m.st.GetActions(ctx, tx, old)
		if err != nil {
			return nil, err
		}
		for i, k := range keys {
			if claimed[k] {
				continue
			}
			a, ok := acts[k]
			switch {
			case !ok || a.Result == "":
				outs[i].fallback = true
			case a.Params != params[i]:
				outs[i].err = fmt.Errorf("%w: %s was first used with %q", ErrKeyReused, k, a.Params)
			default:
				if err := json.Unmarshal([]byte(a.Result), &outs[i].res); err != nil {
					return nil, fmt.Errorf("reading the result of %s: %w", k, err)
				}
				outs[i].res.Replayed = true
			}
		}
	}
	var pairs []*pairBatch
	byPair := map[[2]string]*pairBatch{}
	for i, r := range batch {
		if !claimed[keys[i]] {
			continue
		}
		k := [2]string{r.req.Warehouse, r.req.SKU}
		p := byPair[k]
		if p == nil {
			p = &pairBatch{wh: k[0], sku: k[1]}
			byPair[k] = p
			pairs = append(pairs, p)
		}
		p.idx = append(p.idx, i)
		p.cum = append(p.cum, r.req.Qty)
	}
	if len(pairs) == 0 {
		return nil, nil
	}
	reqs := make([]store.PairRequests, len(pairs))
	for j, p := range pairs {
		p.cum = domain.Cumulative(p.cum)
		reqs[j] = store.PairRequests{Warehouse: p.wh, SKU: p.sku, Cum: p.cum}
	}
	got, err := m.st.ReserveMany(ctx, tx, reqs, now)
	if err != nil {
		return nil, err
	}
	type grant struct {
		i     int
		after store.Stock
	}
	var grants []grant
	var rs []*store.Reservation
	resOf := make(map[int]*store.Reservation)
	failedAt := make(map[int]store.Stock)
	for _, p := range pairs {
		g, ok := got[[2]string{p.wh, p.sku}]
		if !ok {
			// No balance for the pair: on its own, each request gets its
			// own answer (unknown warehouse or SKU), nothing written.
			for _, i := range p.idx {
				outs[i].fallback = true
				giveBack = append(giveBack, keys[i])
			}
			continue
		}
		total := int64(0)
		if g.Granted > 0 {
			total = p.cum[g.Granted-1]
		}
		v0 := g.Version - int64(g.Granted)
		for j, i := range p.idx {
			req := batch[i].req
			r := &store.Reservation{OrderLine: req.OrderLine, Warehouse: req.Warehouse, SKU: req.SKU, Qty: req.Qty}
			switch {
			case j < g.Granted:
				after := g.Stock
				left := total - p.cum[j] // granted after this one
				after.Available, after.Reserved, after.Version = g.Available+left, g.Reserved-left, v0+int64(j)+1
				r.State, r.StockVersion = domain.Reserved, after.Version
				grants = append(grants, grant{i: i, after: after})
			case req.Qty > g.Available:
				r.State, r.StockVersion = domain.Failed, g.Version
				failedAt[i] = g.Stock
			default:
				retry = append(retry, i)
				giveBack = append(giveBack, keys[i])
				continue
			}
			rs = append(rs, r)
			resOf[i] = r
		}
	}
	entries := make([]*store.Entry, len(grants))
	of := make([]*store.Reservation, len(grants))
	for j, g := range grants {
		req := batch[g.i].req
		of[j] = resOf[g.i]
		entries[j] = &store.Entry{Intent: keys[g.i], Warehouse: req.Warehouse, SKU: req.SKU, Movement: domain.MoveReserve,
			Qty: req.Qty, Delta: domain.DeltaOf(domain.MoveReserve, req.Qty), StockVersion: g.after.Version,
			Reason: "order line " + req.OrderLine, Actor: actorOf(batch[g.i].ctx)}
	}
	if err := m.st.InsertGranted(ctx, tx, rs, entries, of, now, now.Add(m.set.ReservationTTL)); err != nil {
		return nil, err
	}
	evs := make([]keelevents.Event, len(grants))
	for j, g := range grants {
		if evs[j], err = stockEvent(*entries[j], g.after, resOf[g.i]); err != nil {
			return nil, err
		}
	}
	if err := m.ev.EmitManyTx(ctx, tx, evs); err != nil {
		return nil, fmt.Errorf("emitting %d ledger events: %w", len(evs), err)
	}
	ledgerOf := make(map[int]int64, len(grants))
	for j, g := range grants {
		ledgerOf[g.i] = entries[j].ID
	}
	var hs []store.HistoryRow
	var doneKeys, results []string
	for i := range batch {
		r := resOf[i]
		if r == nil {
			continue
		}
		h := store.HistoryRow{Reservation: r.ID, History: store.History{Version: 1, From: domain.Pending, Actor: actorOf(batch[i].ctx)}}
		res := Result{Action: "reserve", ReservationID: r.ID, State: r.State, Version: 1, StockVersion: r.StockVersion}
		if r.State == domain.Reserved {
			h.To, h.Action, h.LedgerID = domain.Reserved, string(domain.ActReserve), ledgerOf[i]
			h.Detail = fmt.Sprintf("stock version %d", r.StockVersion)
			res.Outcome, res.LedgerID = OutcomeApplied, ledgerOf[i]
		} else {
			cur := failedAt[i]
			h.To, h.Action = domain.Failed, string(domain.ActFail)
			h.Detail = fmt.Sprintf("available %d < %d at stock version %d", cur.Available, r.Qty, cur.Version)
			res.Outcome = OutcomeInsufficient
		}
		hs = append(hs, h)
		b, err := json.Marshal(res)
		if err != nil {
			return nil, err
		}
		outs[i].res = res
		doneKeys, results = append(doneKeys, keys[i]), append(results, string(b))
	}
	if err := m.st.Finish(ctx, tx, hs, doneKeys, results, now); err != nil {
		return nil, err
	}
	// Requests answered elsewhere must not keep their claimed keys.
	if err := m.st.DeleteActions(ctx, tx, giveBack); err != nil {
		return nil, err
	}
	return retry, nil
}
