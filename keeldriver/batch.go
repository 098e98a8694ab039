package keeldriver

import (
	"context"
	"encoding/json"
	"time"

	"github.com/keelwork/keel/keeltype"
)

// BatchExecutor holds the statements of bulk tasks. Item counters are kept
// by triggers on keel_job (migration 4), never by these methods, so every
// path that moves an item (claim, finish, rescue, cancel, retry, delete)
// counts it in its own transaction.
type BatchExecutor interface {
	// BatchInsert creates a batch in state queued, not yet materialized.
	BatchInsert(ctx context.Context, params *BatchInsertParams) (*keeltype.BatchRow, error)
	// BatchGet returns one batch with its counters (ErrNotFound if absent).
	BatchGet(ctx context.Context, id int64) (*keeltype.BatchRow, error)
	// BatchStateOf reads only a batch's state (the check before a side
	// effect); ErrNotFound if absent.
	BatchStateOf(ctx context.Context, id int64) (keeltype.BatchState, error)
	// BatchList pages batches newest first (id < BeforeID) with an optional
	// state filter; counters included.
	BatchList(ctx context.Context, params *BatchListParams) ([]*keeltype.BatchRow, error)
	// BatchTransition moves a batch from one of From to To in one
	// conditional UPDATE and returns it; when the batch is in none of From
	// it returns *keeltype.BatchStateError with the current state.
	BatchTransition(ctx context.Context, params *BatchTransitionParams) (*keeltype.BatchRow, error)
	// BatchLockForItems locks the batch row against concurrent transitions
	// until the transaction ends (PostgreSQL FOR SHARE; SQLite's one writer)
	// and returns its state. Materialization calls it before each chunk so
	// that terminate and a chunk never interleave.
	BatchLockForItems(ctx context.Context, id int64) (keeltype.BatchState, error)
	// BatchItemsInsert inserts items set-based; a subject already in the
	// batch is left alone (so materialization can be re-run). Returns how
	// many were inserted.
	BatchItemsInsert(ctx context.Context, params *BatchItemsInsertParams) (int, error)
	// BatchSetMaterialized records that every item has been inserted.
	BatchSetMaterialized(ctx context.Context, id int64) error
	// BatchTerminateItems cancels, in one statement, every item of the batch
	// that was never claimed (available or scheduled with fence 0), with
	// result {"reason":"batch_terminated"}. Items ever claimed are left to
	// finish. Returns how many were cancelled.
	BatchTerminateItems(ctx context.Context, id int64, now *time.Time) (int, error)
	// BatchStartReady moves queued, materialized batches to running.
	BatchStartReady(ctx context.Context, now *time.Time) ([]int64, error)
	// BatchFinishDone moves running, materialized batches whose items all
	// ended to completed or partial_completed.
	BatchFinishDone(ctx context.Context, now *time.Time) ([]*keeltype.BatchRow, error)
	// BatchCompact folds the counter ledger of non-final batches (and of the
	// given ids) into one row per bucket. A no-op where counters are stored
	// in place.
	BatchCompact(ctx context.Context, ids []int64) error
	// BatchRecount counts the batch's items per bucket from keel_job.
	BatchRecount(ctx context.Context, id int64) (map[keeltype.BatchOutcome]int64, error)
	// BatchCountAdjust adds deltas to the batch's counters (reconciliation).
	BatchCountAdjust(ctx context.Context, id int64, deltas map[keeltype.BatchOutcome]int64) error
	// BatchItems pages a batch's items in subject order with filters.
	BatchItems(ctx context.Context, params *BatchItemsParams) ([]*keeltype.JobRow, error)
	// BatchSetLastError records an error on the batch (an auto-paused key).
	BatchSetLastError(ctx context.Context, id int64, msg string) error
	// BatchItemSettle ends a batch item parked for its counterpart's ACK
	// (waiting with wait reason "ack", or made available by its wait's
	// deadline and not claimed since) in a final state, without running it
	// again. Conditional on that state: ok=false when the item moved (it was
	// claimed, woken or ended meanwhile). Returns the item's flow key and
	// queue for the caller's failure accounting.
	BatchItemSettle(ctx context.Context, params *BatchItemSettleParams) (ok bool, flowKey, queue string, err error)
}

// BatchItemSettleParams: see BatchExecutor.BatchItemSettle. State is
// completed, failed or cancelled; Error (optional) is appended to the
// item's error history with the row's attempt and fence.
type BatchItemSettleParams struct {
	ID     int64
	State  keeltype.JobState
	Result json.RawMessage
	Error  *keeltype.AttemptError
	Now    *time.Time
}

// BatchInsertParams: see BatchExecutor.BatchInsert.
type BatchInsertParams struct {
	Kind              string
	Name              string
	Reason            string
	Filter            json.RawMessage
	FilterHash        string
	SnapshotAt        time.Time
	CreatedBy         string
	Queue             string
	Rate              float64
	AutoPauseFailures int
	PauseOnKeyPause   bool
	Preview           json.RawMessage
	Now               *time.Time
}

// BatchListParams pages batches newest first.
type BatchListParams struct {
	States   []keeltype.BatchState
	Kind     string
	BeforeID int64 // 0 = from the newest
	Limit    int
}

// BatchTransitionParams: see BatchExecutor.BatchTransition.
type BatchTransitionParams struct {
	ID           int64
	Action       string // for the error: "pause", "resume", ...
	From         []keeltype.BatchState
	To           keeltype.BatchState
	PauseReason  string
	PauseContext json.RawMessage
	Now          *time.Time
}

// BatchItemsInsertParams: parallel slices, one entry per item.
type BatchItemsInsertParams struct {
	BatchID     int64
	Queue       string
	Priority    int
	MaxAttempts int
	Kinds       []string
	Subjects    []string
	FlowKeys    []string
	Args        []json.RawMessage
}

// BatchItemsParams filters and pages items: AfterSubject is the cursor
// (the last subject of the previous page). Outcome, Subject (exact) and
// Text (substring of the wait reason, result or error history) filter.
type BatchItemsParams struct {
	BatchID      int64
	AfterSubject string
	Outcome      keeltype.BatchOutcome
	Subject      string
	Text         string
	Limit        int
}
