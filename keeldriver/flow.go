package keeldriver

import (
	"context"
	"time"

	"github.com/keelwork/keel/keeltype"
)

// FlowExecutor holds the flow-control statements. The engine composes them
// (inside one transaction where limits must hold); drivers only run SQL.
type FlowExecutor interface {
	// FlowKeysAvailable lists distinct flow keys that have available jobs in
	// Queue, in key order starting after After and wrapping around, at most
	// Limit. Jobs without a flow key appear as "" (listed first when
	// present). Implemented as a skip scan over the claim index, so it costs
	// one index probe per key, not a scan of the backlog.
	FlowKeysAvailable(ctx context.Context, params *FlowKeysAvailableParams) ([]string, error)
	// JobClaimKeys claims, for each Keys[i], up to Ns[i] available jobs of
	// Queue with that flow key ("" = no flow key) in (priority, id) order,
	// skipping locked rows, exactly like JobClaim (fence+1, attempt+1,
	// lease). Keys whose persisted state is paused or whose breaker is open
	// get nothing; the check is inside the statement. Nothing is claimed from
	// a paused queue.
	JobClaimKeys(ctx context.Context, params *JobClaimKeysParams) ([]*keeltype.JobRow, error)
	// FlowKeysLock ensures a state row exists for each key and locks the
	// rows (in key order) for the rest of the transaction. With SkipLocked,
	// rows another transaction holds are skipped (absent from the result):
	// claimers use it and so never wait. Without it the call waits: outcome
	// recording must not lose a failure count. Running is filled with the
	// key's current count of running jobs.
	FlowKeysLock(ctx context.Context, params *FlowKeysLockParams) ([]*keeltype.FlowKeyRow, error)
	// FlowKeysSave writes the state fields of locked rows back.
	FlowKeysSave(ctx context.Context, rows []*keeltype.FlowKeyRow, now *time.Time) error
	// FlowKeyGet returns one key's state (ErrNotFound if it has none).
	FlowKeyGet(ctx context.Context, key string) (*keeltype.FlowKeyRow, error)
	// FlowKeyList pages key states in key order (After = last key of the
	// previous page); Prefix filters; OnlyPaused / OnlyTripped narrow.
	FlowKeyList(ctx context.Context, params *FlowKeyListParams) ([]*keeltype.FlowKeyRow, error)
	// FlowKeyStats counts jobs by state and oldest available per key for the
	// given keys.
	FlowKeyStats(ctx context.Context, keys []string) ([]*keeltype.FlowKeyStats, error)

	FlowLimitUpsert(ctx context.Context, limit *keeltype.FlowLimit) (*keeltype.FlowLimit, error)
	FlowLimitDelete(ctx context.Context, pattern, queue string) error
	FlowLimitList(ctx context.Context) ([]*keeltype.FlowLimit, error)

	// JobAgePriorities raises by one level the priority of up to Max
	// available jobs that have been available longer than
	// Interval × (levels already raised + 1), remembering the original in
	// base_priority. Returns how many were raised.
	JobAgePriorities(ctx context.Context, params *JobAgeParams) (int, error)
}

// FlowKeysAvailableParams: see FlowExecutor.FlowKeysAvailable.
type FlowKeysAvailableParams struct {
	Queue string
	After string
	Limit int
}

// JobClaimKeysParams: see FlowExecutor.JobClaimKeys.
type JobClaimKeysParams struct {
	Queue         string
	Owner         string
	LeaseDuration time.Duration
	Keys          []string
	Ns            []int
	Now           *time.Time
}

// FlowKeysLockParams: see FlowExecutor.FlowKeysLock.
type FlowKeysLockParams struct {
	Keys       []string
	SkipLocked bool
	Now        *time.Time
}

// FlowKeyListParams pages flow key states.
type FlowKeyListParams struct {
	Prefix      string
	After       string
	OnlyPaused  bool
	OnlyTripped bool // breaker not closed
	// HideFinishedBatches leaves out the keys of batches that ended
	// (batch:<id>:…, the batch completed, partially completed or
	// terminated): they pile up with every bulk task and need no operator.
	HideFinishedBatches bool
	Limit               int
}

// JobAgeParams: see FlowExecutor.JobAgePriorities.
type JobAgeParams struct {
	Interval time.Duration
	Max      int
	Now      *time.Time
}
