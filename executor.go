package keel

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

func (c *Client[TTx]) exec() keeldriver.Executor { return c.driver.Executor() }
func (c *Client[TTx]) cfg() *Config              { return c.config }
func (c *Client[TTx]) metricsOf() *Metrics       { return c.metrics }

type clientCtxKey struct{}
type executionKey struct{}

// ClientFromContext returns the client running the job whose context this is.
func ClientFromContext[TTx any](ctx context.Context) (*Client[TTx], error) {
	c, ok := ctx.Value(clientCtxKey{}).(*Client[TTx])
	if !ok {
		return nil, errors.New("keel: no client in context (not inside a job, or a different TTx)")
	}
	return c, nil
}

// register makes a claimed job this client's: heartbeats extend its lease
// and a remote cancel reaches it, from the claim on (also while it waits in
// the producer's fetch-ahead buffer).
func (c *Client[TTx]) register(parent context.Context, row *keeltype.JobRow) *execution {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	exe := &execution{row: row, ctx: ctx, cancel: cancel}
	c.registry.add(exe)
	return exe
}

// runJobs runs exe, then whatever the producer buffered, on this slot.
func (c *Client[TTx]) runJobs(p *producer, exe *execution) {
	for exe != nil {
		c.runJob(exe)
		exe = p.next()
	}
	p.done()
}

// handBack returns a claimed job that never started (fetch-ahead buffer at
// stop).
func (c *Client[TTx]) handBack(exe *execution) {
	defer c.registry.remove(exe)
	defer exe.cancel(nil)
	c.completer.add(&pendingFinish{row: exe.row, params: neverStartedParams(exe.row)})
}

// neverStartedParams: available again, attempt given back, and a check
// needed only if one was needed before.
func neverStartedParams(row *keeltype.JobRow) *keeldriver.JobFinishParams {
	return &keeldriver.JobFinishParams{ID: row.ID, Fence: row.Fence, State: keeltype.JobStateAvailable,
		AttemptDelta: -1, NeedsCheck: row.NeedsCheck}
}

// runJob drives one claimed job from start to its finish params.
func (c *Client[TTx]) runJob(exe *execution) {
	defer c.registry.remove(exe)
	defer exe.cancel(nil)
	row, ctx := exe.row, exe.ctx
	if cause := context.Cause(ctx); cause != nil {
		// Stopped or cancelled while buffered: it never started.
		if errors.Is(cause, errJobCancelled) {
			c.completer.add(&pendingFinish{row: row, params: c.failParams(row, JobCancel(cause), nil)})
			return
		}
		c.completer.add(&pendingFinish{row: row, params: neverStartedParams(row)})
		return
	}
	c.metrics.StartLatency.WithLabelValues(row.Queue).Observe(time.Since(row.RunAt).Seconds())

	finish := c.attempt(ctx, exe)
	if exe.isFinalized() {
		c.afterCompleteTx(exe, finish)
		return
	}
	if finish == nil {
		return
	}
	f := &pendingFinish{params: finish, row: row}
	if c.keyTracked(ctx, row) {
		// A tracked key's outcome must be committed before this slot can
		// claim again: the failure that reaches the auto-pause threshold
		// has to pause the key before the next claim, not after it.
		c.completer.flush([]*pendingFinish{f})
		return
	}
	c.completer.add(f)
}

func (c *Client[TTx]) keyTracked(ctx context.Context, row *keeltype.JobRow) bool {
	if row.FlowKey == "" {
		return false
	}
	limits, err := c.limits.get(ctx)
	return err == nil && limits.match(row.FlowKey, row.Queue).Tracked()
}

// attempt runs Check and/or Work and maps the outcome to a transition.
func (c *Client[TTx]) attempt(ctx context.Context, exe *execution) *keeldriver.JobFinishParams {
	row := exe.row
	factory, ok := c.config.Workers.byKind[row.Kind]
	if !ok {
		return c.failParams(row, JobPermanent(fmt.Errorf("no worker registered for kind %q", row.Kind)), nil)
	}
	unit := factory.newUnit(row)
	if err := unit.decode(); err != nil {
		return c.failParams(row, JobPermanent(err), nil)
	}
	ctx = context.WithValue(ctx, clientCtxKey{}, c)
	ctx = context.WithValue(ctx, executionKey{}, exe)
	holder := &resultHolder{}
	ctx = context.WithValue(ctx, resultKey{}, holder)

	if row.BatchID != 0 {
		// The batch may have been paused or terminated since the claim.
		if params := c.batchPrecheck(ctx, row); params != nil {
			return params
		}
	}
	if row.NeedsCheck && unit.hasChecker() {
		if params, done := c.runCheck(ctx, unit, row); done {
			return params
		}
	}
	err := c.runWithTimeout(ctx, unit, row)
	return c.outcomeParams(ctx, row, err, holder)
}

func (c *Client[TTx]) runCheck(ctx context.Context, unit workUnit, row *keeltype.JobRow) (*keeldriver.JobFinishParams, bool) {
	res, err := safeCall(func() (CheckResult, error) { return unit.check(ctx) })
	if err != nil {
		return c.failParams(row, JobUnknown(fmt.Errorf("check: %w", err)), nil), true
	}
	switch res.Decision {
	case CheckCompleted:
		return c.completedParams(row, mustJSON(res.Result)), true
	case CheckManual:
		return c.failParams(row, JobPermanent(fmt.Errorf("check: %s", res.Reason)), nil), true
	case CheckRetry:
		return nil, false
	}
	return c.failParams(row, JobUnknown(fmt.Errorf("check returned no decision")), nil), true
}

func (c *Client[TTx]) runWithTimeout(ctx context.Context, unit workUnit, row *keeltype.JobRow) error {
	timeout := unit.timeout()
	if timeout == 0 {
		timeout = c.config.JobTimeout
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, context.DeadlineExceeded)
		defer cancel()
	}
	_, err := safeCall(func() (struct{}, error) { return struct{}{}, unit.work(ctx) })
	return err
}

type panicError struct {
	value any
	stack string
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v\n%s", p.value, p.stack) }

func safeCall[T any](f func() (T, error)) (res T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: string(debug.Stack())}
		}
	}()
	return f()
}

// outcomeParams maps a worker's returned error (and why its context ended,
// if it did) to the job's next state.
func (c *Client[TTx]) outcomeParams(ctx context.Context, row *keeltype.JobRow, err error, h *resultHolder) *keeldriver.JobFinishParams {
	cause := context.Cause(ctx)
	switch {
	case err == nil:
		return c.completedParams(row, h.value)
	case errors.Is(cause, errClientStopping):
		return handBackParams(row)
	case errors.Is(err, ErrStopping):
		return stoppedParams(row)
	case errors.Is(cause, errJobCancelled):
		return c.failParams(row, JobCancel(err), nil)
	case errors.Is(cause, errLeaseLost):
		// Still try: the fence makes it a no-op that is counted and logged.
		return c.failParams(row, err, nil)
	}
	return c.failParams(row, err, nil)
}

func (c *Client[TTx]) completedParams(row *keeltype.JobRow, result []byte) *keeldriver.JobFinishParams {
	return &keeldriver.JobFinishParams{ID: row.ID, Fence: row.Fence, State: keeltype.JobStateCompleted, Result: result}
}

// handBackParams returns a job interrupted by a hard stop: available again
// with its attempt given back, since the attempt did not fail.
func handBackParams(row *keeltype.JobRow) *keeldriver.JobFinishParams {
	return &keeldriver.JobFinishParams{ID: row.ID, Fence: row.Fence, State: keeltype.JobStateAvailable,
		AttemptDelta: -1, NeedsCheck: true}
}

func mustJSON(v any) []byte {
	if v == nil {
		return nil
	}
	b, err := jsonMarshal(v)
	if err != nil {
		return []byte(fmt.Sprintf(`{"unencodable_result":%q}`, err.Error()))
	}
	return b
}
