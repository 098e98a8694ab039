package keel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// BatchSettle is the conclusion of a batch item that wrote to the outside
// world and parked for the answer (JobWait(WaitACK, …)).
type BatchSettle struct {
	ID int64
	// Success completes the item (the counterpart's valid ACK) with Result.
	Success bool
	Result  any
	// Err is the failure ("class: raw error") when not Success.
	Err error
	// Uncounted ends the item failed without counting toward its key's
	// consecutive failures: the outcome is unknown through no fault of the
	// counterpart (the connection or the process that carried the write
	// was lost). The job is cancelled with Err; its batch outcome is failed.
	Uncounted bool
}

// BatchItemsSettle ends batch items parked for their ACK without running
// them again: their outcome is known, and running them would need a claim,
// which a paused key (or a paused batch) would refuse, leaving an item that
// was written shown as queued. Each settle is conditional on the item still
// parked (or made available by its wait's deadline and not claimed since);
// it returns the ids that applied. Counted failures and successes go to the
// item's key in the same transaction, exactly like a worker's outcome: the
// Nth failure auto-pauses the key (and is audited) before this returns, so
// a caller that frees the next write only afterwards cannot write past the
// threshold.
func (c *Client[TTx]) BatchItemsSettle(ctx context.Context, items []BatchSettle) ([]int64, error) {
	if len(items) == 0 {
		return nil, nil
	}
	tx, err := c.driver.Executor().Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("beginning settle: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	now := time.Now().UTC()
	var (
		applied []int64
		tracked []trackedOutcome
		results []keeldriver.JobFinishResult
		limits  *limitSet
	)
	for _, it := range items {
		p := &keeldriver.BatchItemSettleParams{ID: it.ID, Now: &now}
		var o outcome
		switch {
		case it.Success:
			p.State, p.Result = keeltype.JobStateCompleted, mustJSON(it.Result)
			o = outcome{success: true, jobID: it.ID}
		case it.Uncounted:
			e := JobCancel(nonNil(it.Err))
			p.State = keeltype.JobStateCancelled
			p.Error = &keeltype.AttemptError{Class: keeltype.ErrorClassCancelled, Message: truncMessage(e.Error()), At: now}
		default:
			e := JobFail(nonNil(it.Err))
			p.State = keeltype.JobStateFailed
			p.Error = &keeltype.AttemptError{Class: keeltype.ErrorClassPermanent, Message: truncMessage(e.Error()), At: now}
			o = outcome{class: keeltype.ErrorClassPermanent, message: p.Error.Message, jobID: it.ID}
		}
		ok, key, queue, err := tx.BatchItemSettle(ctx, p)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		applied = append(applied, it.ID)
		if key == "" || it.Uncounted {
			continue
		}
		if limits == nil {
			if limits, err = c.limits.get(ctx); err != nil {
				return nil, fmt.Errorf("reading flow limits: %w", err)
			}
		}
		if l := limits.match(key, queue); l.Tracked() {
			tracked = append(tracked, trackedOutcome{index: len(results), key: key, limit: l, o: o})
			results = append(results, keeldriver.JobFinishResult{ID: it.ID, Applied: true})
		}
	}
	pauses, err := c.recordOutcomes(ctx, tx, tracked, results)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("committing settle: %w", err)
	}
	c.afterAutoPause(pauses)
	return applied, nil
}

func truncMessage(msg string) string {
	if len(msg) > maxErrorMessage {
		return msg[:maxErrorMessage] + "…"
	}
	return msg
}

// batchKeyHeld reports whether a batch item's flow key is paused (by its
// auto-pause or an operator): the check right before a side effect.
func (c *Client[TTx]) batchKeyHeld(ctx context.Context, key string) (bool, error) {
	if key == "" {
		return false, nil
	}
	k, err := flowExec(c.driver.Executor()).FlowKeyGet(ctx, key)
	if errors.Is(err, keeltype.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return k.PausedAt != nil, nil
}
