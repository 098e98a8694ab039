package keelpgx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

var (
	sqlBatchInsert          = queries.Get("BatchInsert")
	sqlBatchGetMany         = queries.Get("BatchGetMany")
	sqlBatchStateOf         = queries.Get("BatchStateOf")
	sqlBatchList            = queries.Get("BatchList")
	sqlBatchTransition      = queries.Get("BatchTransition")
	sqlBatchLockForItems    = queries.Get("BatchLockForItems")
	sqlBatchItemsInsert     = queries.Get("BatchItemsInsert")
	sqlBatchSetMaterialized = queries.Get("BatchSetMaterialized")
	sqlBatchTerminateItems  = queries.Get("BatchTerminateItems")
	sqlBatchStartReady      = queries.Get("BatchStartReady")
	sqlBatchFinishDone      = queries.Get("BatchFinishDone")
	sqlBatchCompact         = queries.Get("BatchCompact")
	sqlBatchRecount         = queries.Get("BatchRecount")
	sqlBatchCountAdjust     = queries.Get("BatchCountAdjust")
	sqlBatchItems           = queries.Get("BatchItems")
	sqlBatchSetLastError    = queries.Get("BatchSetLastError")
	sqlBatchBulkOn          = queries.Get("BatchBulkOn")
	sqlBatchBulkOff         = queries.Get("BatchBulkOff")
)

var _ keeldriver.BatchExecutor = (*executor)(nil)

// BatchInsert creates a queued batch.
func (e *executor) BatchInsert(ctx context.Context, p *keeldriver.BatchInsertParams) (*keeltype.BatchRow, error) {
	var id int64
	err := e.db.QueryRow(ctx, sqlBatchInsert, p.Kind, p.Name, p.Reason, jsonOr(p.Filter, "{}"), p.FilterHash,
		p.SnapshotAt, p.CreatedBy, p.Queue, p.Rate, p.AutoPauseFailures, p.PauseOnKeyPause,
		jsonOr(p.Preview, "{}"), nullTime(p.Now)).Scan(&id)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: inserting batch: %w", err)
	}
	return e.BatchGet(ctx, id)
}

// BatchGet returns one batch with counters.
func (e *executor) BatchGet(ctx context.Context, id int64) (*keeltype.BatchRow, error) {
	rows, err := e.batchesByID(ctx, []int64{id})
	if err != nil {
		return nil, fmt.Errorf("keelpgx: getting batch %d: %w", id, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("keelpgx: getting batch %d: %w", id, keeltype.ErrNotFound)
	}
	return rows[0], nil
}

func (e *executor) batchesByID(ctx context.Context, ids []int64) ([]*keeltype.BatchRow, error) {
	rows, err := e.db.Query(ctx, sqlBatchGetMany, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanBatch)
}

func scanBatch(row pgx.CollectableRow) (*keeltype.BatchRow, error) {
	var b keeltype.BatchRow
	var filter, preview, pauseCtx, counts []byte
	var state string
	var started, paused, completed pgtype.Timestamptz
	if err := row.Scan(&b.ID, &b.Kind, &b.Name, &b.Reason, &filter, &b.FilterHash, &b.SnapshotAt, &b.CreatedBy,
		&b.Queue, &b.Rate, &b.AutoPauseFailures, &b.PauseOnKeyPause, &preview, &state, &b.Materialized,
		&b.PauseReason, &pauseCtx, &b.LastError, &b.CreatedAt, &started, &paused, &completed, &b.UpdatedAt,
		&counts); err != nil {
		return nil, err
	}
	b.State = keeltype.BatchState(state)
	b.Filter, b.Preview, b.PauseContext = bytes.Clone(filter), bytes.Clone(preview), bytes.Clone(pauseCtx)
	b.SnapshotAt, b.CreatedAt, b.UpdatedAt = b.SnapshotAt.UTC(), b.CreatedAt.UTC(), b.UpdatedAt.UTC()
	b.StartedAt, b.PausedAt, b.CompletedAt = tsPtr(started), tsPtr(paused), tsPtr(completed)
	var raw map[string]int64
	if err := json.Unmarshal(counts, &raw); err != nil {
		return nil, fmt.Errorf("decoding batch counters: %w", err)
	}
	b.Counts = make(map[keeltype.BatchOutcome]int64, len(keeltype.AllBatchOutcomes))
	for _, o := range keeltype.AllBatchOutcomes {
		b.Counts[o] = raw[string(o)]
		b.Total += raw[string(o)]
	}
	return &b, nil
}

func tsPtr(t pgtype.Timestamptz) *time.Time {
	if !t.Valid {
		return nil
	}
	v := t.Time.UTC()
	return &v
}

// BatchStateOf reads a batch's state.
func (e *executor) BatchStateOf(ctx context.Context, id int64) (keeltype.BatchState, error) {
	return e.batchState(ctx, sqlBatchStateOf, id)
}

// BatchLockForItems share-locks the batch row for the transaction.
func (e *executor) BatchLockForItems(ctx context.Context, id int64) (keeltype.BatchState, error) {
	return e.batchState(ctx, sqlBatchLockForItems, id)
}

func (e *executor) batchState(ctx context.Context, query string, id int64) (keeltype.BatchState, error) {
	var s string
	if err := e.db.QueryRow(ctx, query, id).Scan(&s); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return "", fmt.Errorf("keelpgx: batch %d: %w", id, keeltype.ErrNotFound)
		}
		return "", fmt.Errorf("keelpgx: reading batch %d: %w", id, err)
	}
	return keeltype.BatchState(s), nil
}

// BatchList pages batches newest first.
func (e *executor) BatchList(ctx context.Context, p *keeldriver.BatchListParams) ([]*keeltype.BatchRow, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	var states []string
	if len(p.States) > 0 {
		states = nullStrings(p.States)
	}
	rows, err := e.db.Query(ctx, sqlBatchList, states, p.BeforeID, nullText(p.Kind), limit)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: listing batches: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	out, err := e.batchesByID(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: listing batches: %w", err)
	}
	return out, nil
}

// BatchTransition applies one conditional transition.
func (e *executor) BatchTransition(ctx context.Context, p *keeldriver.BatchTransitionParams) (*keeltype.BatchRow, error) {
	var id int64
	err := e.db.QueryRow(ctx, sqlBatchTransition, p.ID, nullStrings(p.From), string(p.To), p.PauseReason,
		jsonOr(p.PauseContext, "{}"), nullTime(p.Now)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		st, gerr := e.BatchStateOf(ctx, p.ID)
		if gerr != nil {
			return nil, gerr
		}
		return nil, &keeltype.BatchStateError{BatchID: p.ID, Action: p.Action, State: st}
	}
	if err != nil {
		return nil, fmt.Errorf("keelpgx: %s batch %d: %w", p.Action, p.ID, err)
	}
	return e.BatchGet(ctx, id)
}

// BatchItemsInsert inserts one chunk of items in one statement.
func (e *executor) BatchItemsInsert(ctx context.Context, p *keeldriver.BatchItemsInsertParams) (int, error) {
	n := len(p.Subjects)
	if len(p.Kinds) != n || len(p.FlowKeys) != n || len(p.Args) != n {
		return 0, fmt.Errorf("keelpgx: inserting batch items: slices differ in length: %w", keeltype.ErrInvalidArgument)
	}
	if n == 0 {
		return 0, nil
	}
	args := make([]string, n)
	for i, a := range p.Args {
		args[i] = jsonOr(a, "{}")
	}
	// Own transaction (a savepoint inside the caller's), so the bulk flag
	// never outlives the statement it covers.
	tx, err := e.db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("keelpgx: inserting batch items: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var n64 int64
	if _, err = tx.Exec(ctx, sqlBatchBulkOn); err == nil {
		err = tx.QueryRow(ctx, sqlBatchItemsInsert, p.BatchID, p.Queue, int16(p.Priority), int32(p.MaxAttempts),
			p.Kinds, p.Subjects, p.FlowKeys, args).Scan(&n64)
	}
	if err == nil {
		_, err = tx.Exec(ctx, sqlBatchBulkOff)
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		return 0, fmt.Errorf("keelpgx: inserting batch items: %w", err)
	}
	return int(n64), nil
}

// BatchSetMaterialized marks the batch fully materialized.
func (e *executor) BatchSetMaterialized(ctx context.Context, id int64) error {
	if _, err := e.db.Exec(ctx, sqlBatchSetMaterialized, id); err != nil {
		return fmt.Errorf("keelpgx: marking batch %d materialized: %w", id, err)
	}
	return nil
}

// BatchTerminateItems cancels never-claimed items in one statement.
func (e *executor) BatchTerminateItems(ctx context.Context, id int64, now *time.Time) (int, error) {
	tag, err := e.db.Exec(ctx, sqlBatchTerminateItems, id, nullTime(now))
	if err != nil {
		return 0, fmt.Errorf("keelpgx: terminating items of batch %d: %w", id, err)
	}
	return int(tag.RowsAffected()), nil
}

// BatchStartReady starts materialized queued batches.
func (e *executor) BatchStartReady(ctx context.Context, now *time.Time) ([]int64, error) {
	rows, err := e.db.Query(ctx, sqlBatchStartReady, nullTime(now))
	if err != nil {
		return nil, fmt.Errorf("keelpgx: starting batches: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// BatchFinishDone completes running batches with no live items.
func (e *executor) BatchFinishDone(ctx context.Context, now *time.Time) ([]*keeltype.BatchRow, error) {
	rows, err := e.db.Query(ctx, sqlBatchFinishDone, nullTime(now))
	if err != nil {
		return nil, fmt.Errorf("keelpgx: finishing batches: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	return e.batchesByID(ctx, ids)
}

// BatchCompact folds counter ledgers.
func (e *executor) BatchCompact(ctx context.Context, ids []int64) error {
	if ids == nil {
		ids = []int64{}
	}
	if _, err := e.db.Exec(ctx, sqlBatchCompact, ids); err != nil {
		return fmt.Errorf("keelpgx: compacting batch counters: %w", err)
	}
	return nil
}

// BatchRecount counts items per bucket from keel_job.
func (e *executor) BatchRecount(ctx context.Context, id int64) (map[keeltype.BatchOutcome]int64, error) {
	rows, err := e.db.Query(ctx, sqlBatchRecount, id)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: recounting batch %d: %w", id, err)
	}
	out := map[keeltype.BatchOutcome]int64{}
	var bucket string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&bucket, &n}, func() error {
		out[keeltype.BatchOutcome(bucket)] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("keelpgx: recounting batch %d: %w", id, err)
	}
	return out, nil
}

// BatchCountAdjust appends correction rows to the ledger.
func (e *executor) BatchCountAdjust(ctx context.Context, id int64, deltas map[keeltype.BatchOutcome]int64) error {
	var buckets []string
	var ns []int64
	for o, n := range deltas {
		buckets, ns = append(buckets, string(o)), append(ns, n)
	}
	if len(buckets) == 0 {
		return nil
	}
	if _, err := e.db.Exec(ctx, sqlBatchCountAdjust, id, buckets, ns); err != nil {
		return fmt.Errorf("keelpgx: adjusting counters of batch %d: %w", id, err)
	}
	return nil
}

// BatchItems pages a batch's items in subject order.
func (e *executor) BatchItems(ctx context.Context, p *keeldriver.BatchItemsParams) ([]*keeltype.JobRow, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	rows, err := e.db.Query(ctx, sqlBatchItems, p.BatchID, nullText(p.AfterSubject), nullText(string(p.Outcome)),
		nullText(p.Subject), nullText(p.Text), limit)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: listing items of batch %d: %w", p.BatchID, err)
	}
	jobs, err := jobsOf(rows)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: listing items of batch %d: %w", p.BatchID, err)
	}
	return jobs, nil
}

// BatchSetLastError records an error on a batch.
func (e *executor) BatchSetLastError(ctx context.Context, id int64, msg string) error {
	if _, err := e.db.Exec(ctx, sqlBatchSetLastError, id, msg); err != nil {
		return fmt.Errorf("keelpgx: recording batch %d error: %w", id, err)
	}
	return nil
}

var sqlBatchItemSettle = queries.Get("BatchItemSettle")

// BatchItemSettle ends an item parked for its ACK without running it again.
func (e *executor) BatchItemSettle(ctx context.Context, p *keeldriver.BatchItemSettleParams) (bool, string, string, error) {
	var result, errEntry *string
	if len(p.Result) > 0 {
		s := string(p.Result)
		result = &s
	}
	if p.Error != nil {
		raw, err := json.Marshal(map[string]any{"class": p.Error.Class, "message": p.Error.Message})
		if err != nil {
			return false, "", "", err
		}
		s := string(raw)
		errEntry = &s
	}
	var key, queue string
	err := e.db.QueryRow(ctx, sqlBatchItemSettle, p.ID, string(p.State), result, errEntry, nullTime(p.Now)).Scan(&key, &queue)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, "", "", nil
	}
	if err != nil {
		return false, "", "", fmt.Errorf("keelpgx: settling batch item %d: %w", p.ID, err)
	}
	return true, key, queue, nil
}
