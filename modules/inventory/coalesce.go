package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/modules/inventory/domain"
)

// coalescer merges concurrent reservations of one (warehouse, SKU) into
// one conditional statement: the first caller to find the pair idle leads,
// takes every request waiting (up to a bound) in arrival order, and runs
// one transaction that records each request's key, grants the requests
// whose running total fits the available quantity with one UPDATE, and
// writes each granted request's reservation, ledger row and event. A flash
// sale then costs a commit per batch, not a lock hand-off per request.
type coalescer[TTx any] struct {
	m   *Module[TTx]
	max int

	mu    sync.Mutex
	pairs map[string]*pairQueue
	stats CoalesceStats
}

// CoalesceStats counts the coalescer's work.
type CoalesceStats struct {
	Batches   int64 `json:"batches"`   // statements run
	Requests  int64 `json:"requests"`  // requests they carried
	Largest   int   `json:"largest"`   // most requests in one
	Fallbacks int64 `json:"fallbacks"` // requests run on their own after a failed batch
}

func (c *coalescer[TTx]) snapshot() CoalesceStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

type pairQueue struct {
	waiting []*coRequest
	running bool
}

type coRequest struct {
	req  ReserveRequest
	ctx  context.Context
	done chan coResult
}

type coResult struct {
	res      Result
	err      error
	fallback bool // the batch failed: run the request on its own
}

func newCoalescer[TTx any](m *Module[TTx], max int) *coalescer[TTx] {
	return &coalescer[TTx]{m: m, max: max, pairs: map[string]*pairQueue{}}
}

func (c *coalescer[TTx]) reserve(ctx context.Context, req ReserveRequest) (Result, error) {
	r := &coRequest{req: req, ctx: ctx, done: make(chan coResult, 1)}
	key := StockKey(req.Warehouse, req.SKU)
	c.mu.Lock()
	q := c.pairs[key]
	if q == nil {
		q = &pairQueue{}
		c.pairs[key] = q
	}
	q.waiting = append(q.waiting, r)
	lead := !q.running
	q.running = true
	c.mu.Unlock()
	if lead {
		c.lead(key, q)
	}
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

// lead runs batches until the pair's queue is empty.
func (c *coalescer[TTx]) lead(key string, q *pairQueue) {
	for {
		c.mu.Lock()
		if len(q.waiting) == 0 {
			q.running = false
			delete(c.pairs, key)
			c.mu.Unlock()
			return
		}
		// One request per key in a batch: a second of the same key waits
		// for the next one, where it is a replay.
		var batch, rest []*coRequest
		seen := map[string]bool{}
		for _, r := range q.waiting {
			if len(batch) < c.max && !seen[r.req.OrderLine] {
				seen[r.req.OrderLine] = true
				batch = append(batch, r)
			} else {
				rest = append(rest, r)
			}
		}
		q.waiting = rest
		c.stats.Batches++
		c.stats.Requests += int64(len(batch))
		c.stats.Largest = max(c.stats.Largest, len(batch))
		c.mu.Unlock()
		again := c.run(batch)
		if len(again) > 0 {
			c.mu.Lock()
			q.waiting = append(again, q.waiting...) // keep their place in arrival order
			c.mu.Unlock()
		}
	}
}

// run executes one batch and answers its requests; it returns those that
// neither got stock nor are short of it (a larger request before them
// did not fit): they go first in the next batch.
func (c *coalescer[TTx]) run(batch []*coRequest) (again []*coRequest) {
	m := c.m
	ctx := context.WithoutCancel(batch[0].ctx)
	wh, sku := batch[0].req.Warehouse, batch[0].req.SKU
	results := make([]Result, len(batch))
	var retry []int
	err := m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		retry = retry[:0]
		var fresh []int
		for i, r := range batch {
			results[i] = Result{}
			claimed, err := m.st.ClaimAction(ctx, tx, reserveKey(r.req.OrderLine), r.req.params(), m.now())
			if err != nil {
				return err
			}
			if claimed {
				fresh = append(fresh, i)
			} else if err := m.replay(ctx, tx, reserveKey(r.req.OrderLine), r.req.params(), &results[i]); err != nil {
				return err
			}
		}
		if len(fresh) == 0 {
			return nil
		}
		qtys := make([]int64, len(fresh))
		for j, i := range fresh {
			qtys[j] = batch[i].req.Qty
		}
		cum := domain.Cumulative(qtys)
		st, granted, ok, err := m.st.ReserveBatch(ctx, tx, wh, sku, cum, m.now())
		if err != nil {
			return err
		}
		if !ok {
			return errUnknownInBatch
		}
		total := int64(0)
		if granted > 0 {
			total = cum[granted-1]
		}
		v0 := st.Version - int64(granted)
		for j, i := range fresh {
			r := batch[i].req
			var res Result
			switch {
			case j < granted:
				after := st
				left := total - cum[j] // granted after this one
				after.Available, after.Reserved, after.Version = st.Available+left, st.Reserved-left, v0+int64(j)+1
				res, err = m.recordReserved(ctx, tx, r, after)
			case r.Qty > st.Available:
				res, err = m.recordFailed(ctx, tx, r, st)
			default:
				retry = append(retry, i)
				continue
			}
			if err != nil {
				return err
			}
			b, err := json.Marshal(res)
			if err != nil {
				return err
			}
			if err := m.st.SetActionResult(ctx, tx, reserveKey(r.OrderLine), string(b)); err != nil {
				return err
			}
			results[i] = res
		}
		// Requests to retry must not keep their claimed keys.
		for _, i := range retry {
			if _, err := m.st.Exec(ctx, tx, "ActionDelete", reserveKey(batch[i].req.OrderLine)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		// Each request runs on its own, where its error (a reused key, an
		// unknown pair) is its own and not its batch's.
		c.mu.Lock()
		c.stats.Fallbacks += int64(len(batch))
		c.mu.Unlock()
		for _, r := range batch {
			r.done <- coResult{err: err, fallback: true}
		}
		return nil
	}
	isRetry := map[int]bool{}
	for _, i := range retry {
		isRetry[i] = true
		again = append(again, batch[i])
	}
	for i, r := range batch {
		if !isRetry[i] {
			r.done <- coResult{res: results[i]}
		}
	}
	return again
}

var errUnknownInBatch = errors.New("no stock row for the pair")
