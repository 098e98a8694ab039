package keel

import (
	"context"
	"sync"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// registry tracks the jobs this client is running, for heartbeats, remote
// cancellation and stop.
type registry struct {
	mu    sync.Mutex
	jobs  map[int64]*execution
	empty chan struct{} // closed while no job runs; replaced when one starts
}

func newRegistry() *registry {
	r := &registry{jobs: map[int64]*execution{}, empty: make(chan struct{})}
	close(r.empty)
	return r
}

func (r *registry) add(e *execution) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.jobs) == 0 {
		r.empty = make(chan struct{})
	}
	if old := r.jobs[e.row.ID]; old != nil {
		// The earlier execution lost its lease long ago; it keeps running
		// until its worker returns, but only the new one is heartbeated.
		old.cancel(errLeaseLost)
	}
	r.jobs[e.row.ID] = e
}

// remove drops e if it is still the registered execution of its job (the
// same job can be re-claimed by this client after a rescue).
func (r *registry) remove(e *execution) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.jobs[e.row.ID] != e {
		return
	}
	delete(r.jobs, e.row.ID)
	if len(r.jobs) == 0 {
		close(r.empty)
	}
}

func (r *registry) get(id int64) *execution {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.jobs[id]
}

func (r *registry) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.jobs)
}

// leases returns the (id, fence) pairs to heartbeat.
func (r *registry) leases() (ids, fences []int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, e := range r.jobs {
		ids = append(ids, id)
		fences = append(fences, e.row.Fence)
	}
	return ids, fences
}

func (r *registry) cancelAll(cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.jobs {
		e.cancel(cause)
	}
}

func (r *registry) waitEmpty(ctx context.Context) error {
	r.mu.Lock()
	ch := r.empty
	r.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// execution is one claimed job while its worker runs.
type execution struct {
	row    *keeltype.JobRow
	ctx    context.Context
	cancel context.CancelCauseFunc
	// finalized is set when the worker committed the outcome itself
	// (CompleteTx), so the executor must not finish the job again.
	finalized bool
	// txParams is the completion CompleteTx wrote into the worker's
	// transaction (nil if it was refused as stale): whether that
	// transaction committed is settled once the worker returns.
	txParams *keeldriver.JobFinishParams
	mu       sync.Mutex
}

func (e *execution) isFinalized() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.finalized
}
