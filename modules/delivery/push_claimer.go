package delivery

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
)

// claimer starts attempts in batches: every claim that queued while the
// previous statement ran goes into the next one, so that under load the
// database commits once per batch instead of once per push. A claim still
// names its record's allowed statuses and version, row by row.
type claimer[TTx any] struct {
	st      *store[TTx]
	log     *slog.Logger
	in      chan claimReq
	quit    chan struct{}
	stopped chan struct{} // closed once every batcher returned
	once    sync.Once
	wg      sync.WaitGroup
}

type claimReq struct {
	c     *claim
	reply chan claimResp
}

type claimResp struct {
	rec *Record
	err error
}

func newClaimer[TTx any](st *store[TTx], log *slog.Logger) *claimer[TTx] {
	return &claimer[TTx]{st: st, log: log, in: make(chan claimReq, 4096), quit: make(chan struct{}),
		stopped: make(chan struct{})}
}

// batchers is how many batches of claims (and of ACK conclusions) run
// at once: one statement's commit overlaps the next batch's gathering.
const batchers = 4

func (p *claimer[TTx]) start(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	for range batchers {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for {
				select {
				case first := <-p.in:
					p.run(ctx, gather(p.in, first, maxApplyBatch))
				case <-p.quit:
					p.drain(ctx)
					return
				}
			}
		}()
	}
	go func() {
		<-p.quit
		p.wg.Wait()
		close(p.stopped)
	}()
}

// drain runs what is queued at the stop.
func (p *claimer[TTx]) drain(ctx context.Context) {
	for {
		select {
		case first := <-p.in:
			p.run(ctx, gather(p.in, first, maxApplyBatch))
		default:
			return
		}
	}
}

func (p *claimer[TTx]) stop() {
	p.once.Do(func() { close(p.quit) })
	p.wg.Wait()
}

// claim queues c and waits for its result: the claimed record, or
// ErrNoRows when the record was not in one of its statuses.
func (p *claimer[TTx]) claim(ctx context.Context, c *claim) (*Record, error) {
	req := claimReq{c: c, reply: make(chan claimResp, 1)}
	select {
	case p.in <- req:
	case <-p.quit:
		return nil, fmt.Errorf("delivery: %w", keel.ErrStopping)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// A queued claim is always answered, even at the stop (the batch runs
	// detached from ctx: a claim that committed must be known to its
	// caller); one queued after the last batch ran was never made.
	select {
	case r := <-req.reply:
		return r.rec, r.err
	case <-p.stopped:
		select {
		case r := <-req.reply:
			return r.rec, r.err
		default:
			return nil, fmt.Errorf("delivery: %w", keel.ErrStopping)
		}
	}
}

func (p *claimer[TTx]) run(ctx context.Context, batch []claimReq) {
	got, err := p.st.claimMany(ctx, batch)
	for _, q := range batch {
		switch rec := got[q.c.ID]; {
		case err != nil:
			q.reply <- claimResp{err: err}
		case rec != nil && rec.SendToken == q.c.Token:
			q.reply <- claimResp{rec: rec}
		default:
			q.reply <- claimResp{err: keelsql.ErrNoRows}
		}
	}
}
