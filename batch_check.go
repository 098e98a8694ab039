package keel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// batchTerminatedReason is the result reason of items a termination ended.
const batchTerminatedReason = "batch_terminated"

// batchHoldOutcome hands an item back: its batch is paused (or queued
// again); the claim excludes it until the batch runs.
type batchHoldOutcome struct{ state keeltype.BatchState }

func (o *batchHoldOutcome) Error() string {
	return fmt.Sprintf("batch is %s: item handed back", o.state)
}

// batchTerminatedOutcome ends an item unprocessed: its batch was terminated
// before this item's side effect.
type batchTerminatedOutcome struct{}

func (o *batchTerminatedOutcome) Error() string { return "batch terminated: item unprocessed" }

// batchStater is what BatchCheck needs of the client running a job,
// whatever its transaction type.
type batchStater interface {
	batchStateOf(ctx context.Context, id int64) (keeltype.BatchState, error)
	batchKeyHeld(ctx context.Context, key string) (bool, error)
}

func (c *Client[TTx]) batchStateOf(ctx context.Context, id int64) (keeltype.BatchState, error) {
	return c.driver.Executor().BatchStateOf(ctx, id)
}

// BatchCheck is the check right before a batch item's side effect: call it
// in Work immediately before calling the outside world, and return its
// error when it returns one. nil means go ahead (the batch runs, or the job
// is no batch item). When the batch was paused meanwhile, or the item's own
// key (an auto-paused application), the error hands the item back
// (available again, attempt returned, no failure counted); it is claimed
// again after the batch or the key resumes. When the batch was
// terminated, the error ends the item unprocessed. Any other error is a
// failure to read the batch (retryable).
func BatchCheck(ctx context.Context, job JobRef) error {
	row := job.Row()
	if row == nil || row.BatchID == 0 {
		return nil
	}
	s, ok := ctx.Value(clientCtxKey{}).(batchStater)
	if !ok {
		return errors.New("keel: BatchCheck called outside a job")
	}
	st, err := s.batchStateOf(ctx, row.BatchID)
	if err != nil {
		return fmt.Errorf("keel: checking batch %d: %w", row.BatchID, err)
	}
	if v := batchVerdict(st); v != nil {
		return v
	}
	// The key's auto-pause committed with the failure that reached the
	// threshold; an item claimed before it must not write after it.
	paused, err := s.batchKeyHeld(ctx, row.FlowKey)
	if err != nil {
		return fmt.Errorf("keel: checking flow key %q: %w", row.FlowKey, err)
	}
	if paused {
		return &batchHoldOutcome{state: "key_paused"}
	}
	return nil
}

func batchVerdict(st keeltype.BatchState) error {
	switch st {
	case keeltype.BatchQueued, keeltype.BatchPaused:
		return &batchHoldOutcome{state: st}
	case keeltype.BatchTerminated:
		return &batchTerminatedOutcome{}
	}
	return nil
}

// batchPrecheck runs before Check and Work of a batch item, claimed while
// its batch ran: a batch paused since hands the item back; a batch
// terminated since ends it unprocessed only when this is the item's first
// claim (fence 1, no check pending), as nothing can have been sent. An item
// claimed before may have been sent: its Check and the worker's BatchCheck
// decide.
func (c *Client[TTx]) batchPrecheck(ctx context.Context, row *keeltype.JobRow) *keeldriver.JobFinishParams {
	st, err := c.batchStateOf(ctx, row.BatchID)
	if err != nil {
		return nil
	}
	switch v := batchVerdict(st).(type) {
	case *batchHoldOutcome:
		return c.failParams(row, v, nil)
	case *batchTerminatedOutcome:
		if row.Fence == 1 && !row.NeedsCheck {
			return c.failParams(row, v, nil)
		}
	}
	return nil
}

// batchOutcomeParams maps BatchCheck's outcomes; false for other errors.
func batchOutcomeParams(p *keeldriver.JobFinishParams, row *keeltype.JobRow, err error) bool {
	var hold *batchHoldOutcome
	var term *batchTerminatedOutcome
	switch {
	case errors.As(err, &hold):
		p.State, p.AttemptDelta, p.NeedsCheck = keeltype.JobStateAvailable, -1, row.NeedsCheck
		p.RunAt = ptr(time.Now().UTC())
		return true
	case errors.As(err, &term):
		p.State, p.Result = keeltype.JobStateCancelled, mustJSON(map[string]string{"reason": batchTerminatedReason})
		return true
	}
	return false
}

// batchLimitsFresh reloads the limit cache once when a listed key of a
// batch has no limit in it: the batch was created after the cache was
// filled (and its notification has not arrived), so its rate and
// auto-pause would otherwise not govern this claim.
func (c *Client[TTx]) batchLimitsFresh(ctx context.Context, keys []string, queue string, limits *limitSet) (*limitSet, error) {
	for _, k := range keys {
		if _, ok := batchOfKey(k); ok && limits.match(k, queue) == nil {
			return c.limits.fresh(ctx)
		}
	}
	return limits, nil
}
