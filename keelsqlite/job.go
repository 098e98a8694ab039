package keelsqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// defaultBatchMax bounds promote, rescue and prune when Max is unset, so one
// call never holds the write lock for an unbounded sweep.
const defaultBatchMax = 1000

// batchMax treats an unset (or negative, which SQLite's LIMIT would read as
// unlimited) Max as defaultBatchMax.
func batchMax(n int) int {
	if n <= 0 {
		return defaultBatchMax
	}
	return n
}

// JobInsertMany inserts in one transaction with one prepared statement: per
// row so that each duplicate can be told apart and answered with the
// original row.
func (e *executor) JobInsertMany(ctx context.Context, params []*keeldriver.JobInsertParams) ([]keeldriver.JobInsertResult, error) {
	if len(params) == 0 {
		return nil, nil
	}
	out := make([]keeldriver.JobInsertResult, 0, len(params))
	err := e.write(ctx, "inserting jobs", func(q dbtx) error {
		ins, err := q.PrepareContext(ctx, queries.Get("JobInsert"))
		if err != nil {
			return err
		}
		defer ins.Close()
		now := micros(time.Now())
		for _, p := range params {
			res, err := insertJob(ctx, q, ins, p, now)
			if err != nil {
				return err
			}
			out = append(out, res)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func insertJob(ctx context.Context, q dbtx, ins *sql.Stmt, p *keeldriver.JobInsertParams, now int64) (keeldriver.JobInsertResult, error) {
	runAt := now
	if p.RunAt != nil {
		runAt = micros(*p.RunAt)
	}
	job, err := scanJob(ins.QueryRowContext(ctx,
		sql.Named("kind", p.Kind),
		sql.Named("queue", cmp.Or(p.Queue, "default")),
		sql.Named("args", jsonOr(p.Args, "{}")),
		sql.Named("metadata", jsonOr(p.Metadata, "{}")),
		sql.Named("priority", cmp.Or(p.Priority, 2)),
		sql.Named("run_at", runAt),
		sql.Named("now", now),
		sql.Named("max_attempts", cmp.Or(p.MaxAttempts, 25)),
		sql.Named("idempotency_key", nullString(p.IdempotencyKey)),
		sql.Named("flow_key", nullString(p.FlowKey)),
		sql.Named("batch_id", nullInt(p.BatchID)),
		sql.Named("subject", nullString(p.Subject)),
	))
	if err == nil {
		return keeldriver.JobInsertResult{Job: job}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) || p.IdempotencyKey == "" {
		return keeldriver.JobInsertResult{}, fmt.Errorf("job of kind %q: %w", p.Kind, err)
	}
	// DO NOTHING fired: the key exists, and inside this write transaction the
	// original cannot vanish before we read it.
	job, err = scanJob(q.QueryRowContext(ctx, queries.Get("JobGetByIdempotency"),
		sql.Named("kind", p.Kind), sql.Named("idempotency_key", p.IdempotencyKey)))
	if err != nil {
		return keeldriver.JobInsertResult{}, fmt.Errorf("reading duplicate of kind %q: %w", p.Kind, err)
	}
	return keeldriver.JobInsertResult{Job: job, Duplicate: true}, nil
}

// JobInsertClaimed inserts one job already claimed (keeldriver.InsertClaimer).
func (e *executor) JobInsertClaimed(ctx context.Context, p *keeldriver.JobInsertClaimedParams) (*keeltype.JobRow, error) {
	if err := keeldriver.ValidateClaimedInsert(p); err != nil {
		return nil, fmt.Errorf("keelsqlite: inserting a claimed job: %w", err)
	}
	var job *keeltype.JobRow
	err := e.write(ctx, "inserting a claimed job", func(q dbtx) error {
		j, now := p.Job, time.Now()
		var err error
		job, err = scanJob(q.QueryRowContext(ctx, queries.Get("JobInsertClaimed"),
			sql.Named("kind", j.Kind),
			sql.Named("queue", cmp.Or(j.Queue, "default")),
			sql.Named("args", jsonOr(j.Args, "{}")),
			sql.Named("metadata", jsonOr(j.Metadata, "{}")),
			sql.Named("priority", cmp.Or(j.Priority, 2)),
			sql.Named("max_attempts", cmp.Or(j.MaxAttempts, 25)),
			sql.Named("subject", nullString(j.Subject)),
			sql.Named("owner", p.Owner),
			sql.Named("lease_expires_at", micros(now.Add(p.LeaseDuration))),
			sql.Named("now", micros(now)),
		))
		if errors.Is(err, sql.ErrNoRows) {
			job, err = nil, nil // the queue is paused
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return job, nil
}

// JobClaim claims in one UPDATE ... RETURNING; RETURNING order is unspecified
// in SQLite, so the rows are sorted here.
func (e *executor) JobClaim(ctx context.Context, p *keeldriver.JobClaimParams) ([]*keeltype.JobRow, error) {
	if p.Max <= 0 {
		return nil, nil
	}
	if p.LeaseDuration <= 0 {
		return nil, fmt.Errorf("keelsqlite: claiming jobs: lease duration %s: %w", p.LeaseDuration, keeltype.ErrInvalidArgument)
	}
	now := resolveNow(p.Now)
	var jobs []*keeltype.JobRow
	err := e.write(ctx, "claiming jobs", func(q dbtx) (err error) {
		jobs, err = collectJobs(q.QueryContext(ctx, queries.Get("JobClaim"),
			sql.Named("owner", p.Owner),
			sql.Named("lease_expires_at", micros(now.Add(p.LeaseDuration))),
			sql.Named("now", micros(now)),
			sql.Named("queue", p.Queue),
			sql.Named("max", p.Max),
		))
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(jobs, func(a, b *keeltype.JobRow) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.ID, b.ID))
	})
	return jobs, nil
}

// JobHeartbeat extends every matching lease in one statement; the pairs
// travel as one JSON array. IDs come back in input order.
func (e *executor) JobHeartbeat(ctx context.Context, p *keeldriver.JobHeartbeatParams) ([]int64, error) {
	if len(p.IDs) != len(p.Fences) {
		return nil, fmt.Errorf("keelsqlite: heartbeat: %d ids but %d fences: %w", len(p.IDs), len(p.Fences), keeltype.ErrInvalidArgument)
	}
	if len(p.IDs) == 0 {
		return nil, nil
	}
	pairs := make([][2]int64, len(p.IDs))
	for i := range p.IDs {
		pairs[i] = [2]int64{p.IDs[i], p.Fences[i]}
	}
	encoded, err := json.Marshal(pairs)
	if err != nil {
		return nil, fmt.Errorf("keelsqlite: heartbeat: %w", err)
	}
	now := resolveNow(p.Now)
	var got []int64
	err = e.write(ctx, "heartbeat", func(q dbtx) (err error) {
		got, err = collectInt64s(q.QueryContext(ctx, queries.Get("JobHeartbeat"),
			sql.Named("lease_expires_at", micros(now.Add(p.LeaseDuration))),
			sql.Named("pairs", string(encoded)),
			sql.Named("owner", p.Owner),
		))
		return err
	})
	if err != nil {
		return nil, err
	}
	return inInputOrder(p.IDs, got), nil
}

// inInputOrder returns the members of got in the order they appear in ids.
func inInputOrder(ids, got []int64) []int64 {
	set := make(map[int64]bool, len(got))
	for _, id := range got {
		set[id] = true
	}
	out := make([]int64, 0, len(got))
	for _, id := range ids {
		if set[id] {
			out = append(out, id)
			delete(set, id)
		}
	}
	return out
}

// JobFinishMany applies each fenced transition with one prepared statement in
// one transaction. A row that does not apply is read back (still under the
// write lock) to report its current state and fence.
func (e *executor) JobFinishMany(ctx context.Context, params []*keeldriver.JobFinishParams) ([]keeldriver.JobFinishResult, error) {
	for _, p := range params {
		if !p.State.Valid() || p.State == keeltype.JobStateRunning {
			return nil, fmt.Errorf("keelsqlite: finishing job %d: state %q: %w", p.ID, p.State, keeltype.ErrInvalidArgument)
		}
	}
	if len(params) == 0 {
		return nil, nil
	}
	out := make([]keeldriver.JobFinishResult, 0, len(params))
	err := e.write(ctx, "finishing jobs", func(q dbtx) error {
		fin, err := q.PrepareContext(ctx, queries.Get("JobFinish"))
		if err != nil {
			return err
		}
		defer fin.Close()
		for _, p := range params {
			res, err := finishJob(ctx, q, fin, p)
			if err != nil {
				return err
			}
			out = append(out, res)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func finishJob(ctx context.Context, q dbtx, fin *sql.Stmt, p *keeldriver.JobFinishParams) (keeldriver.JobFinishResult, error) {
	res := keeldriver.JobFinishResult{ID: p.ID}
	var id int64
	err := fin.QueryRowContext(ctx, finishArgs(p)...).Scan(&id)
	if err == nil {
		res.Applied = true
		return res, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return res, fmt.Errorf("job %d: %w", p.ID, err)
	}
	var state string
	err = q.QueryRowContext(ctx, queries.Get("JobCurrent"), sql.Named("id", p.ID)).Scan(&state, &res.CurrentFence)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return res, fmt.Errorf("reading job %d: %w", p.ID, err)
	}
	res.CurrentState = keeltype.JobState(state)
	return res, nil
}

func finishArgs(p *keeldriver.JobFinishParams) []any {
	now := resolveNow(p.Now)
	runAt := now
	if p.RunAt != nil {
		runAt = *p.RunAt
	}
	var errClass, errMessage, errAt, errAttempt any
	if p.Error != nil {
		errClass, errMessage = string(p.Error.Class), p.Error.Message
		errAt = cmp.Or(p.Error.At, now).UTC().Format(time.RFC3339Nano)
		if p.Error.Attempt > 0 {
			errAttempt = p.Error.Attempt
		}
	}
	var result any
	if len(p.Result) > 0 {
		result = string(p.Result)
	}
	return []any{
		sql.Named("id", p.ID),
		sql.Named("fence", p.Fence),
		sql.Named("state", string(p.State)),
		sql.Named("now", micros(now)),
		sql.Named("err_class", errClass),
		sql.Named("err_message", errMessage),
		sql.Named("err_at", errAt),
		sql.Named("err_attempt", errAttempt),
		sql.Named("attempt_delta", p.AttemptDelta),
		sql.Named("run_at", micros(runAt)),
		sql.Named("result", result),
		sql.Named("wait_reason", nullString(p.WaitReason)),
		sql.Named("wait_deadline", nullMicros(p.WaitDeadline)),
		sql.Named("needs_check", p.NeedsCheck),
	}
}

// JobPromote returns the distinct queues that received work, sorted.
func (e *executor) JobPromote(ctx context.Context, p *keeldriver.JobPromoteParams) ([]string, error) {
	now := resolveNow(p.Now)
	queues := map[string]bool{}
	err := e.write(ctx, "promoting jobs", func(q dbtx) error {
		rows, err := q.QueryContext(ctx, queries.Get("JobPromote"),
			sql.Named("now", micros(now)), sql.Named("max", batchMax(p.Max)))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				return err
			}
			queues[name] = true
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(queues))
	for name := range queues {
		out = append(out, name)
	}
	slices.Sort(out)
	return out, nil
}

// JobRescue returns the rescued rows, after the update, in id order.
func (e *executor) JobRescue(ctx context.Context, p *keeldriver.JobRescueParams) ([]*keeltype.JobRow, error) {
	now := resolveNow(p.Now)
	var jobs []*keeltype.JobRow
	err := e.write(ctx, "rescuing jobs", func(q dbtx) (err error) {
		jobs, err = collectJobs(q.QueryContext(ctx, queries.Get("JobRescue"),
			sql.Named("now", micros(now)),
			sql.Named("at", now.Format(time.RFC3339Nano)),
			sql.Named("max", batchMax(p.Max)),
		))
		return err
	})
	if err != nil {
		return nil, err
	}
	sortByID(jobs)
	return jobs, nil
}

func sortByID(jobs []*keeltype.JobRow) {
	slices.SortFunc(jobs, func(a, b *keeltype.JobRow) int { return cmp.Compare(a.ID, b.ID) })
}

// JobCancel cancels (or requests cancellation of) one job.
func (e *executor) JobCancel(ctx context.Context, p *keeldriver.JobCancelParams) (*keeltype.JobRow, error) {
	now := resolveNow(p.Now)
	return e.transition(ctx, "cancelling job", "cancel", p.ID, queries.Get("JobCancel"),
		sql.Named("id", p.ID), sql.Named("now", micros(now)))
}

// JobRetry makes one job available now.
func (e *executor) JobRetry(ctx context.Context, p *keeldriver.JobRetryParams) (*keeltype.JobRow, error) {
	now := resolveNow(p.Now)
	return e.transition(ctx, "retrying job", "retry", p.ID, queries.Get("JobRetry"),
		sql.Named("id", p.ID), sql.Named("now", micros(now)))
}

// JobDelete deletes a job that is not running and returns it.
func (e *executor) JobDelete(ctx context.Context, id int64) (*keeltype.JobRow, error) {
	return e.transition(ctx, "deleting job", "delete", id, queries.Get("JobDelete"), sql.Named("id", id))
}

// transition runs a conditional single-row statement returning the row. When
// it matches nothing, the current state (read under the same write lock)
// decides between ErrNotFound and an InvalidStateError.
func (e *executor) transition(ctx context.Context, what, action string, id int64, query string, args ...any) (*keeltype.JobRow, error) {
	var job *keeltype.JobRow
	err := e.write(ctx, what, func(q dbtx) (err error) {
		job, err = scanJob(q.QueryRowContext(ctx, query, args...))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var state string
		var fence int64
		err = q.QueryRowContext(ctx, queries.Get("JobCurrent"), sql.Named("id", id)).Scan(&state, &fence)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("job %d: %w", id, keeltype.ErrNotFound)
		}
		if err != nil {
			return err
		}
		return &keeltype.InvalidStateError{JobID: id, Action: action, State: keeltype.JobState(state)}
	})
	if err != nil {
		return nil, err
	}
	return job, nil
}

// JobWake wakes waiting jobs by IDs (narrowed by flow key and wait reason
// when set), else by flow key (and wait reason); IDs come back sorted.
func (e *executor) JobWake(ctx context.Context, p *keeldriver.JobWakeParams) ([]int64, error) {
	now := micros(resolveNow(p.Now))
	var query string
	var args []any
	switch {
	case len(p.IDs) > 0:
		encoded, err := json.Marshal(p.IDs)
		if err != nil {
			return nil, fmt.Errorf("keelsqlite: waking jobs: %w", err)
		}
		query, args = queries.Get("JobWakeIDs"), []any{sql.Named("now", now), sql.Named("ids", string(encoded)),
			sql.Named("flow_key", p.FlowKey), sql.Named("wait_reason", p.WaitReason)}
	case p.FlowKey != "":
		query, args = queries.Get("JobWakeFlow"), []any{sql.Named("now", now),
			sql.Named("flow_key", p.FlowKey), sql.Named("wait_reason", p.WaitReason)}
	default:
		return nil, fmt.Errorf("keelsqlite: waking jobs: neither ids nor flow key: %w", keeltype.ErrInvalidArgument)
	}
	var ids []int64
	err := e.write(ctx, "waking jobs", func(q dbtx) (err error) {
		ids, err = collectInt64s(q.QueryContext(ctx, query, args...))
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return ids, nil
}

// JobGet reads one job; a missing one is keeltype.ErrNotFound.
func (e *executor) JobGet(ctx context.Context, id int64) (*keeltype.JobRow, error) {
	var job *keeltype.JobRow
	err := e.read(ctx, "getting job", false, func(q dbtx) (err error) {
		job, err = scanJob(q.QueryRowContext(ctx, queries.Get("JobGet"), sql.Named("id", id)))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("job %d: %w", id, keeltype.ErrNotFound)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return job, nil
}

// JobList pages jobs by id. Unset filters are NULL in the one static
// statement per direction, so no SQL is built from input.
func (e *executor) JobList(ctx context.Context, p *keeldriver.JobListParams) ([]*keeltype.JobRow, error) {
	args, err := listArgs(p)
	if err != nil {
		return nil, fmt.Errorf("keelsqlite: listing jobs: %w", err)
	}
	query := queries.Get("JobListAsc")
	if p.Desc {
		query = queries.Get("JobListDesc")
	}
	var jobs []*keeltype.JobRow
	err = e.read(ctx, "listing jobs", false, func(q dbtx) (err error) {
		jobs, err = collectJobs(q.QueryContext(ctx, query, args...))
		return err
	})
	if err != nil {
		return nil, err
	}
	return jobs, nil
}

func listArgs(p *keeldriver.JobListParams) ([]any, error) {
	states := make([]string, len(p.States))
	for i, s := range p.States {
		states[i] = string(s)
	}
	jsonStates, err := jsonList(states)
	if err != nil {
		return nil, err
	}
	kinds, err := jsonList(p.Kinds)
	if err != nil {
		return nil, err
	}
	queues, err := jsonList(p.Queues)
	if err != nil {
		return nil, err
	}
	before := p.BeforeID
	if before <= 0 {
		before = math.MaxInt64
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	return []any{
		sql.Named("after_id", max(p.AfterID, 0)),
		sql.Named("before_id", before),
		sql.Named("states", jsonStates),
		sql.Named("kinds", kinds),
		sql.Named("queues", queues),
		sql.Named("flow_key", nullString(p.FlowKey)),
		sql.Named("batch_id", nullInt(p.BatchID)),
		sql.Named("limit", limit),
	}, nil
}

// jsonList encodes a filter list for json_each; an empty list is NULL (no
// filter).
func jsonList(v []string) (any, error) {
	if len(v) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// JobFinalizedCounts counts jobs finalized in (Since, Until] by state.
func (e *executor) JobFinalizedCounts(ctx context.Context, p *keeldriver.JobFinalizedCountsParams) (map[keeltype.JobState]int64, error) {
	out := map[keeltype.JobState]int64{}
	err := e.read(ctx, "counting finalized jobs", false, func(q dbtx) error {
		rows, err := q.QueryContext(ctx, queries.Get("JobFinalizedCounts"),
			sql.Named("since", micros(p.Since)), sql.Named("until", micros(p.Until)))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var st string
			var n int64
			if err := rows.Scan(&st, &n); err != nil {
				return err
			}
			if n > 0 {
				out[keeltype.JobState(st)] += n
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// JobPrune deletes up to Max final jobs finalized before Before.
func (e *executor) JobPrune(ctx context.Context, p *keeldriver.JobPruneParams) (int, error) {
	var n int64
	err := e.write(ctx, "pruning jobs", func(q dbtx) error {
		res, err := q.ExecContext(ctx, queries.Get("JobPrune"),
			sql.Named("before", micros(p.Before)), sql.Named("max", batchMax(p.Max)))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, err
	}
	return int(n), nil
}
