package keel

import (
	"context"
	"errors"
	"fmt"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// CompleteTx completes a running job inside the caller's transaction, so the
// worker's business write and the job's completion commit together or not at
// all. The fence is checked in that transaction: if the job is no longer this
// worker's, it returns *keeltype.StaleFenceError and the caller must roll
// back. If the transaction rolls back, the job stays running and returns
// through lease expiry (with needs_check set), never silently completed.
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
		markFinalized(ctx, row)
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
	markFinalized(ctx, row)
	c.countOutcome(row, params)
	return nil
}

// markFinalized tells the executor running row's attempt (if ctx is that
// attempt's) that the outcome has been settled by the worker.
func markFinalized(ctx context.Context, row *keeltype.JobRow) {
	if exe, ok := ctx.Value(executionKey{}).(*execution); ok && exe.row.ID == row.ID && exe.row.Fence == row.Fence {
		exe.markFinalized()
	}
}

// IsStaleFence reports whether err is a rejected stale commit.
func IsStaleFence(err error) bool { return errors.Is(err, keeltype.ErrStaleFence) }
