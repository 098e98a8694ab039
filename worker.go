package keel

import (
	"context"
	"fmt"
	"time"

	"github.com/keelwork/keel/keeltype"
)

// Worker works jobs of one kind.
type Worker[T JobArgs] interface {
	Work(ctx context.Context, job *Job[T]) error
}

// Checker is implemented by workers whose side effects can be queried. Check
// runs instead of Work for a job whose last attempt ended unknown (or whose
// owner died mid-attempt), before any new attempt.
type Checker[T JobArgs] interface {
	Check(ctx context.Context, job *Job[T]) (CheckResult, error)
}

// Timeouter is implemented by workers that want a per-job timeout other than
// the kind's configured one.
type Timeouter[T JobArgs] interface {
	Timeout(job *Job[T]) time.Duration
}

// WorkerFunc adapts a function to a Worker.
type WorkerFunc[T JobArgs] func(ctx context.Context, job *Job[T]) error

// Work calls f.
func (f WorkerFunc[T]) Work(ctx context.Context, job *Job[T]) error { return f(ctx, job) }

// WorkerOpts configure one kind.
type WorkerOpts struct {
	// Timeout bounds one attempt; the context is cancelled after it and the
	// attempt counts as a timeout failure. Default Config.JobTimeout; negative
	// means no timeout.
	Timeout time.Duration
	// LeaseDuration is how long a claim holds without a heartbeat. Default
	// Config.LeaseDuration. Heartbeats extend it every third of it.
	LeaseDuration time.Duration
}

// Workers is the registry of kinds a client can work.
type Workers struct {
	byKind map[string]workUnitFactory
}

// NewWorkers returns an empty registry.
func NewWorkers() *Workers { return &Workers{byKind: map[string]workUnitFactory{}} }

// AddWorker registers w for T's kind. It panics on a duplicate kind, like
// http.Handle: registration is program wiring, not input.
func AddWorker[T JobArgs](ws *Workers, w Worker[T], opts ...WorkerOpts) {
	if err := AddWorkerSafely(ws, w, opts...); err != nil {
		panic(err)
	}
}

// AddWorkerSafely is AddWorker returning an error instead of panicking.
func AddWorkerSafely[T JobArgs](ws *Workers, w Worker[T], opts ...WorkerOpts) error {
	var zero T
	kind := zero.Kind()
	if kind == "" {
		return fmt.Errorf("keel: %T.Kind() is empty", zero)
	}
	if _, dup := ws.byKind[kind]; dup {
		return fmt.Errorf("keel: worker for kind %q registered twice", kind)
	}
	f := &typedFactory[T]{worker: w}
	if len(opts) > 0 {
		f.opts = opts[0]
	}
	ws.byKind[kind] = f
	return nil
}

// Kinds lists the registered kinds.
func (ws *Workers) Kinds() []string {
	kinds := make([]string, 0, len(ws.byKind))
	for k := range ws.byKind {
		kinds = append(kinds, k)
	}
	return kinds
}

// workUnit is one claimed job bound to its typed worker; the executor drives
// it without knowing T.
type workUnit interface {
	decode() error
	hasChecker() bool
	check(ctx context.Context) (CheckResult, error)
	work(ctx context.Context) error
	timeout() time.Duration
}

type workUnitFactory interface {
	newUnit(row *keeltype.JobRow) workUnit
	options() WorkerOpts
}

type typedFactory[T JobArgs] struct {
	worker Worker[T]
	opts   WorkerOpts
}

func (f *typedFactory[T]) newUnit(row *keeltype.JobRow) workUnit {
	return &typedUnit[T]{factory: f, row: row}
}

func (f *typedFactory[T]) options() WorkerOpts { return f.opts }

type typedUnit[T JobArgs] struct {
	factory *typedFactory[T]
	row     *keeltype.JobRow
	job     *Job[T]
}

func (u *typedUnit[T]) decode() error {
	job, err := unmarshalJob[T](u.row)
	u.job = job
	return err
}

func (u *typedUnit[T]) hasChecker() bool {
	_, ok := u.factory.worker.(Checker[T])
	return ok
}

func (u *typedUnit[T]) check(ctx context.Context) (CheckResult, error) {
	return u.factory.worker.(Checker[T]).Check(ctx, u.job)
}

func (u *typedUnit[T]) work(ctx context.Context) error { return u.factory.worker.Work(ctx, u.job) }

func (u *typedUnit[T]) timeout() time.Duration {
	if t, ok := u.factory.worker.(Timeouter[T]); ok {
		return t.Timeout(u.job)
	}
	return u.factory.opts.Timeout
}
