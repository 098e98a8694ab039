package keelsqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

var _ keeldriver.BatchExecutor = (*executor)(nil)

// BatchInsert creates a queued batch.
func (e *executor) BatchInsert(ctx context.Context, p *keeldriver.BatchInsertParams) (*keeltype.BatchRow, error) {
	var out *keeltype.BatchRow
	err := e.write(ctx, "inserting batch", func(q dbtx) error {
		var id int64
		err := q.QueryRowContext(ctx, queries.Get("BatchInsert"),
			sql.Named("kind", p.Kind), sql.Named("name", p.Name), sql.Named("reason", p.Reason),
			sql.Named("filter", jsonOr(p.Filter, "{}")), sql.Named("filter_hash", p.FilterHash),
			sql.Named("snapshot_at", micros(p.SnapshotAt)), sql.Named("created_by", p.CreatedBy),
			sql.Named("queue", p.Queue), sql.Named("rate", p.Rate),
			sql.Named("autopause_failures", p.AutoPauseFailures), sql.Named("pause_on_key_pause", p.PauseOnKeyPause),
			sql.Named("preview", jsonOr(p.Preview, "{}")), sql.Named("now", micros(resolveNow(p.Now)))).Scan(&id)
		if err != nil {
			return err
		}
		out, err = getBatch(ctx, q, id)
		return err
	})
	return out, err
}

// BatchGet returns one batch with counters.
func (e *executor) BatchGet(ctx context.Context, id int64) (*keeltype.BatchRow, error) {
	var out *keeltype.BatchRow
	err := e.read(ctx, "getting batch", false, func(q dbtx) (err error) {
		out, err = getBatch(ctx, q, id)
		return err
	})
	return out, err
}

func getBatch(ctx context.Context, q dbtx, id int64) (*keeltype.BatchRow, error) {
	var (
		b                                     keeltype.BatchRow
		filter, preview, pauseCtx, counts, st string
		snapshot, created, updated            int64
		started, paused, completed            sql.NullInt64
	)
	err := q.QueryRowContext(ctx, queries.Get("BatchGet"), sql.Named("id", id)).Scan(&b.ID, &b.Kind, &b.Name,
		&b.Reason, &filter, &b.FilterHash, &snapshot, &b.CreatedBy, &b.Queue, &b.Rate, &b.AutoPauseFailures,
		&b.PauseOnKeyPause, &preview, &st, &b.Materialized, &b.PauseReason, &pauseCtx, &b.LastError, &created,
		&started, &paused, &completed, &updated, &counts)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("batch %d: %w", id, keeltype.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	b.State = keeltype.BatchState(st)
	b.Filter, b.Preview, b.PauseContext = json.RawMessage(filter), json.RawMessage(preview), json.RawMessage(pauseCtx)
	b.SnapshotAt, b.CreatedAt, b.UpdatedAt = fromMicros(snapshot), fromMicros(created), fromMicros(updated)
	b.StartedAt, b.PausedAt, b.CompletedAt = timePtr(started), timePtr(paused), timePtr(completed)
	var raw map[string]int64
	if err := json.Unmarshal([]byte(counts), &raw); err != nil {
		return nil, fmt.Errorf("decoding counters of batch %d: %w", id, err)
	}
	b.Counts = make(map[keeltype.BatchOutcome]int64, len(keeltype.AllBatchOutcomes))
	for _, o := range keeltype.AllBatchOutcomes {
		b.Counts[o] = raw[string(o)]
		b.Total += raw[string(o)]
	}
	return &b, nil
}

// BatchStateOf reads a batch's state.
func (e *executor) BatchStateOf(ctx context.Context, id int64) (keeltype.BatchState, error) {
	var st string
	err := e.read(ctx, "reading batch state", false, func(q dbtx) error {
		err := q.QueryRowContext(ctx, queries.Get("BatchStateOf"), sql.Named("id", id)).Scan(&st)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("batch %d: %w", id, keeltype.ErrNotFound)
		}
		return err
	})
	return keeltype.BatchState(st), err
}

// BatchLockForItems reads the state on the writer: write transactions begin
// IMMEDIATE, so inside one no other transition can run until it ends.
func (e *executor) BatchLockForItems(ctx context.Context, id int64) (keeltype.BatchState, error) {
	var st string
	err := e.write(ctx, "locking batch", func(q dbtx) error {
		err := q.QueryRowContext(ctx, queries.Get("BatchStateOf"), sql.Named("id", id)).Scan(&st)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("batch %d: %w", id, keeltype.ErrNotFound)
		}
		return err
	})
	return keeltype.BatchState(st), err
}

// BatchList pages batches newest first.
func (e *executor) BatchList(ctx context.Context, p *keeldriver.BatchListParams) ([]*keeltype.BatchRow, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	var states any
	if len(p.States) > 0 {
		raw, err := json.Marshal(p.States)
		if err != nil {
			return nil, err
		}
		states = string(raw)
	}
	var out []*keeltype.BatchRow
	err := e.read(ctx, "listing batches", true, func(q dbtx) error {
		ids, err := collectInt64s(q.QueryContext(ctx, queries.Get("BatchList"), sql.Named("states", states),
			sql.Named("before", p.BeforeID), sql.Named("kind", nullString(p.Kind)), sql.Named("limit", limit)))
		if err != nil {
			return err
		}
		for _, id := range ids {
			b, err := getBatch(ctx, q, id)
			if err != nil {
				return err
			}
			out = append(out, b)
		}
		return nil
	})
	return out, err
}

// BatchTransition applies one conditional transition.
func (e *executor) BatchTransition(ctx context.Context, p *keeldriver.BatchTransitionParams) (*keeltype.BatchRow, error) {
	from, err := json.Marshal(p.From)
	if err != nil {
		return nil, err
	}
	var out *keeltype.BatchRow
	err = e.write(ctx, p.Action+" batch", func(q dbtx) error {
		var id int64
		err := q.QueryRowContext(ctx, queries.Get("BatchTransition"), sql.Named("id", p.ID),
			sql.Named("from", string(from)), sql.Named("to", string(p.To)), sql.Named("pause_reason", p.PauseReason),
			sql.Named("pause_context", jsonOr(p.PauseContext, "{}")), sql.Named("now", micros(resolveNow(p.Now)))).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			var st string
			if err := q.QueryRowContext(ctx, queries.Get("BatchStateOf"), sql.Named("id", p.ID)).Scan(&st); err != nil {
				if errors.Is(err, sql.ErrNoRows) {
					return fmt.Errorf("batch %d: %w", p.ID, keeltype.ErrNotFound)
				}
				return err
			}
			return &keeltype.BatchStateError{BatchID: p.ID, Action: p.Action, State: keeltype.BatchState(st)}
		}
		if err != nil {
			return err
		}
		out, err = getBatch(ctx, q, id)
		return err
	})
	return out, err
}

// BatchItemsInsert inserts a chunk with one prepared statement in one
// transaction.
func (e *executor) BatchItemsInsert(ctx context.Context, p *keeldriver.BatchItemsInsertParams) (int, error) {
	n := len(p.Subjects)
	if len(p.Kinds) != n || len(p.FlowKeys) != n || len(p.Args) != n {
		return 0, fmt.Errorf("keelsqlite: inserting batch items: slices differ in length: %w", keeltype.ErrInvalidArgument)
	}
	inserted := 0
	err := e.write(ctx, "inserting batch items", func(q dbtx) error {
		ins, err := q.PrepareContext(ctx, queries.Get("BatchItemInsert"))
		if err != nil {
			return err
		}
		defer ins.Close()
		now := micros(time.Now())
		for i := range n {
			res, err := ins.ExecContext(ctx, sql.Named("kind", p.Kinds[i]), sql.Named("queue", p.Queue),
				sql.Named("args", jsonOr(p.Args[i], "{}")), sql.Named("priority", p.Priority),
				sql.Named("now", now), sql.Named("max_attempts", p.MaxAttempts), sql.Named("flow_key", p.FlowKeys[i]),
				sql.Named("batch_id", p.BatchID), sql.Named("subject", p.Subjects[i]))
			if err != nil {
				return err
			}
			k, _ := res.RowsAffected()
			inserted += int(k)
		}
		return nil
	})
	return inserted, err
}

// BatchSetMaterialized marks the batch fully materialized.
func (e *executor) BatchSetMaterialized(ctx context.Context, id int64) error {
	return e.write(ctx, "marking batch materialized", func(q dbtx) error {
		_, err := q.ExecContext(ctx, queries.Get("BatchSetMaterialized"), sql.Named("id", id),
			sql.Named("now", micros(time.Now())))
		return err
	})
}

// BatchTerminateItems cancels never-claimed items in one statement.
func (e *executor) BatchTerminateItems(ctx context.Context, id int64, now *time.Time) (int, error) {
	var n int64
	err := e.write(ctx, "terminating batch items", func(q dbtx) error {
		res, err := q.ExecContext(ctx, queries.Get("BatchTerminateItems"), sql.Named("id", id),
			sql.Named("now", micros(resolveNow(now))))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// BatchStartReady starts materialized queued batches.
func (e *executor) BatchStartReady(ctx context.Context, now *time.Time) ([]int64, error) {
	var ids []int64
	err := e.write(ctx, "starting batches", func(q dbtx) (err error) {
		ids, err = collectInt64s(q.QueryContext(ctx, queries.Get("BatchStartReady"), sql.Named("now", micros(resolveNow(now)))))
		return err
	})
	return ids, err
}

// BatchFinishDone completes running batches with no live items.
func (e *executor) BatchFinishDone(ctx context.Context, now *time.Time) ([]*keeltype.BatchRow, error) {
	var out []*keeltype.BatchRow
	err := e.write(ctx, "finishing batches", func(q dbtx) error {
		ids, err := collectInt64s(q.QueryContext(ctx, queries.Get("BatchFinishDone"), sql.Named("now", micros(resolveNow(now)))))
		if err != nil {
			return err
		}
		for _, id := range ids {
			b, err := getBatch(ctx, q, id)
			if err != nil {
				return err
			}
			out = append(out, b)
		}
		return nil
	})
	return out, err
}

// BatchCompact is a no-op: counters are updated in place.
func (e *executor) BatchCompact(context.Context, []int64) error { return nil }

// BatchRecount counts items per bucket from keel_job.
func (e *executor) BatchRecount(ctx context.Context, id int64) (map[keeltype.BatchOutcome]int64, error) {
	out := map[keeltype.BatchOutcome]int64{}
	err := e.read(ctx, "recounting batch", false, func(q dbtx) error {
		rows, err := q.QueryContext(ctx, queries.Get("BatchRecount"), sql.Named("id", id))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var b string
			var n int64
			if err := rows.Scan(&b, &n); err != nil {
				return err
			}
			out[keeltype.BatchOutcome(b)] = n
		}
		return rows.Err()
	})
	return out, err
}

// BatchCountAdjust adds corrections to the counters.
func (e *executor) BatchCountAdjust(ctx context.Context, id int64, deltas map[keeltype.BatchOutcome]int64) error {
	return e.write(ctx, "adjusting batch counters", func(q dbtx) error {
		for o, n := range deltas {
			if n == 0 {
				continue
			}
			if _, err := q.ExecContext(ctx, queries.Get("BatchCountAdjust"), sql.Named("id", id),
				sql.Named("bucket", string(o)), sql.Named("n", n)); err != nil {
				return err
			}
		}
		return nil
	})
}

// BatchItems pages a batch's items in subject order.
func (e *executor) BatchItems(ctx context.Context, p *keeldriver.BatchItemsParams) ([]*keeltype.JobRow, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	var out []*keeltype.JobRow
	err := e.read(ctx, "listing batch items", false, func(q dbtx) (err error) {
		out, err = collectJobs(q.QueryContext(ctx, queries.Get("BatchItems"), sql.Named("id", p.BatchID),
			sql.Named("after", nullString(p.AfterSubject)), sql.Named("outcome", nullString(string(p.Outcome))),
			sql.Named("subject", nullString(p.Subject)), sql.Named("text", nullString(p.Text)),
			sql.Named("limit", limit)))
		return err
	})
	return out, err
}

// BatchSetLastError records an error on a batch.
func (e *executor) BatchSetLastError(ctx context.Context, id int64, msg string) error {
	return e.write(ctx, "recording batch error", func(q dbtx) error {
		_, err := q.ExecContext(ctx, queries.Get("BatchSetLastError"), sql.Named("id", id), sql.Named("msg", msg),
			sql.Named("now", micros(time.Now())))
		return err
	})
}

// BatchItemSettle ends an item parked for its ACK without running it again.
func (e *executor) BatchItemSettle(ctx context.Context, p *keeldriver.BatchItemSettleParams) (bool, string, string, error) {
	now := resolveNow(p.Now)
	var result, errClass, errMessage any
	if len(p.Result) > 0 {
		result = string(p.Result)
	}
	if p.Error != nil {
		errClass, errMessage = string(p.Error.Class), p.Error.Message
	}
	var key, queue string
	ok := false
	err := e.write(ctx, "settling a batch item", func(q dbtx) error {
		err := q.QueryRowContext(ctx, queries.Get("BatchItemSettle"), sql.Named("id", p.ID), sql.Named("state", string(p.State)),
			sql.Named("result", result), sql.Named("err_class", errClass), sql.Named("err_message", errMessage),
			sql.Named("err_at", now.UTC().Format(time.RFC3339Nano)), sql.Named("now", micros(now))).Scan(&key, &queue)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		ok = err == nil
		return err
	})
	return ok, key, queue, err
}
