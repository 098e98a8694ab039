package keelpgx

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

func scanQueue(row pgx.CollectableRow) (*keeltype.QueueRow, error) {
	var q keeltype.QueueRow
	var pausedAt pgtype.Timestamptz
	var pausedBy pgtype.Text
	if err := row.Scan(&q.Name, &pausedAt, &pausedBy, &q.CreatedAt, &q.UpdatedAt); err != nil {
		return nil, err
	}
	q.PausedAt = timePtr(pausedAt)
	q.PausedBy = pausedBy.String
	q.CreatedAt = q.CreatedAt.UTC()
	q.UpdatedAt = q.UpdatedAt.UTC()
	return &q, nil
}

func (e *executor) queueRow(ctx context.Context, verb, query string, args ...any) (*keeltype.QueueRow, error) {
	rows, err := e.db.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: %s: %w", verb, err)
	}
	q, err := pgx.CollectExactlyOneRow(rows, scanQueue)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: %s: %w", verb, err)
	}
	return q, nil
}

// QueuePause records the pause; the next claim statement on any instance
// sees it.
func (e *executor) QueuePause(ctx context.Context, p *keeldriver.QueuePauseParams) (*keeltype.QueueRow, error) {
	return e.queueRow(ctx, "pausing queue "+p.Name, sqlQueuePause, p.Name, nullText(p.By), nullTime(p.Now))
}

// QueueResume clears the pause (creating the row if the queue had none).
func (e *executor) QueueResume(ctx context.Context, name string) (*keeltype.QueueRow, error) {
	return e.queueRow(ctx, "resuming queue "+name, sqlQueueResume, name)
}

// QueueList returns every keel_queue row by name.
func (e *executor) QueueList(ctx context.Context) ([]*keeltype.QueueRow, error) {
	rows, err := e.db.Query(ctx, sqlQueueList)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: listing queues: %w", err)
	}
	queues, err := pgx.CollectRows(rows, scanQueue)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: listing queues: %w", err)
	}
	return queues, nil
}

// QueueStats returns per-queue counts by state for every queue that has jobs
// or a keel_queue row, ordered by name. States without jobs are absent from
// Counts.
func (e *executor) QueueStats(ctx context.Context) ([]*keeltype.QueueStats, error) {
	rows, err := e.db.Query(ctx, sqlQueueStats)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: queue stats: %w", err)
	}
	var (
		out    []*keeltype.QueueStats
		name   string
		state  pgtype.Text
		count  int64
		oldest pgtype.Timestamptz
		paused bool
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &state, &count, &oldest, &paused}, func() error {
		if len(out) == 0 || out[len(out)-1].Queue != name {
			out = append(out, &keeltype.QueueStats{
				Queue: name, Counts: map[keeltype.JobState]int64{}, OldestAvailable: timePtr(oldest), Paused: paused,
			})
		}
		if state.Valid {
			out[len(out)-1].Counts[keeltype.JobState(state.String)] = count
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("keelpgx: queue stats: %w", err)
	}
	return out, nil
}
