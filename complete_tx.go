package keel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// CompleteTx completes a running job inside the caller's transaction, so the
// worker's business write and the job's completion commit together or not at
// all. The fence is checked in that transaction: if the job is no longer this
// worker's, it returns *keeltype.StaleFenceError and the caller must roll
// back. If the transaction rolls back and the worker still returns nil, the
// job stays running and returns through lease expiry (with needs_check set),
// never silently completed. If the worker returns an error instead (a commit
// that failed, or whose outcome was lost with the connection), the engine
// settles the job as soon as the worker returns: see afterCompleteTx.
func (c *Client[TTx]) CompleteTx(ctx context.Context, tx TTx, job JobRef, result any) error {
	row := job.Row()
	params := c.completedParams(row, mustJSON(result))
	results, err := c.driver.UnwrapExecutor(tx).JobFinishMany(ctx, []*keeldriver.JobFinishParams{params})
	if err != nil {
		return fmt.Errorf("completing job %d: %w", row.ID, err)
	}
	if len(results) != 1 || !results[0].Applied {
		r := keeldriver.JobFinishResult{}
		if len(results) == 1 {
			r = results[0]
		}
		// The job is no longer this attempt's either way: the executor must
		// not try again with the same fence once the worker returns.
		markFinalized(ctx, row, nil)
		c.recordStale(row, params, r)
		return &keeltype.StaleFenceError{JobID: row.ID, Fence: row.Fence, CurrentFence: r.CurrentFence, CurrentState: r.CurrentState}
	}
	pending := []*pendingFinish{{params: params, row: row}}
	if tracked := c.trackedOutcomes(ctx, pending); len(tracked) > 0 {
		pauses, err := c.recordOutcomes(ctx, c.driver.UnwrapExecutor(tx), tracked, results)
		if err != nil {
			return err
		}
		c.afterAutoPause(pauses) // logged before commit: an auto-pause needs a failure, never a completion
	}
	if !markFinalized(ctx, row, params) {
		// Outside an executor nobody learns how the transaction ends.
		c.countOutcome(row, params)
	}
	return nil
}

// markFinalized tells the executor running row's attempt (if ctx is that
// attempt's) that the outcome has been settled by the worker, and which
// completion the worker's transaction carries (nil: refused as stale). It
// reports whether an executor took note.
func markFinalized(ctx context.Context, row *keeltype.JobRow, params *keeldriver.JobFinishParams) bool {
	exe, ok := ctx.Value(executionKey{}).(*execution)
	if !ok || exe.row.ID != row.ID || exe.row.Fence != row.Fence {
		return false
	}
	exe.mu.Lock()
	exe.finalized, exe.txParams = true, params
	exe.mu.Unlock()
	return true
}

func (e *execution) completedInTx() *keeldriver.JobFinishParams {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.txParams
}

// uncommittedSettleTimeout bounds how long the engine waits to settle a job
// whose CompleteTx transaction may not have committed. The fenced update
// waits on the row lock the worker's transaction held; past this bound the
// lease's expiry is left to return the job.
const uncommittedSettleTimeout = 10 * time.Second

// afterCompleteTx runs once the worker of a job that called CompleteTx
// returns. A nil error (finish is the completion) means the worker saw its
// commit succeed. An error means the commit failed or its outcome is
// unknown (the connection died mid-commit): the transaction either
// committed or it did not, and a fenced conditional update from a fresh
// connection finds out which without a read-then-write race. It hands the
// job back (available at once, needs_check set, the error recorded; to an
// operator, manual, once the attempt budget is spent) only while the job is
// still running at this attempt's fence; the update waits
// on the row lock while the worker's transaction is still alive, so it
// cannot overtake a commit in flight. If the job is completed at this
// fence, the commit landed and its reply was lost: that is a success.
func (c *Client[TTx]) afterCompleteTx(exe *execution, finish *keeldriver.JobFinishParams) {
	row := exe.row
	done := exe.completedInTx()
	if done == nil {
		return // refused as stale inside the transaction: not ours to settle
	}
	if finish == nil || finish.State == keeltype.JobStateCompleted {
		c.countOutcome(row, done)
		return
	}
	workerErr := errors.New("the worker failed after CompleteTx; its transaction's commit is uncertain")
	if finish.Error != nil && finish.Error.Message != "" {
		workerErr = fmt.Errorf("after CompleteTx, commit uncertain: %s", finish.Error.Message)
	}
	now := time.Now().UTC()
	back := &keeldriver.JobFinishParams{ID: row.ID, Fence: row.Fence, State: keeltype.JobStateAvailable,
		NeedsCheck: true, Error: attemptError(row, keeltype.ErrorClassUnknown, workerErr, now)}
	if row.Attempt >= row.MaxAttempts {
		// A worker that keeps failing after CompleteTx must not loop without
		// end: past the budget the job goes to an operator, as a retry would.
		back.State = keeltype.JobStateManual
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(exe.ctx), uncommittedSettleTimeout)
	defer cancel()
	results, err := c.driver.Executor().JobFinishMany(ctx, []*keeldriver.JobFinishParams{back})
	if err != nil {
		c.logger.Warn("settling a job whose CompleteTx commit is uncertain failed; its lease will return it",
			"job_id", row.ID, "kind", row.Kind, "fence", row.Fence, "error", err)
		return
	}
	if len(results) == 1 && results[0].Applied {
		c.countOutcome(row, back)
		c.metrics.CommitUncertain.WithLabelValues(row.Kind, "handed_back").Inc()
		return
	}
	r := keeldriver.JobFinishResult{}
	if len(results) == 1 {
		r = results[0]
	}
	if r.CurrentState == keeltype.JobStateCompleted && r.CurrentFence == row.Fence {
		c.countOutcome(row, done)
		c.metrics.CommitUncertain.WithLabelValues(row.Kind, "committed").Inc()
		return
	}
	c.recordStale(row, back, r)
}

// IsStaleFence reports whether err is a rejected stale commit.
func IsStaleFence(err error) bool { return errors.Is(err, keeltype.ErrStaleFence) }
