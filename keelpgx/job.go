package keelpgx

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// Insert defaults mirror the column defaults of 001_engine: inserting
// explicit values (needed for a set-based insert) bypasses them.
const (
	defaultQueue       = "default"
	defaultPriority    = 2
	defaultMaxAttempts = 25
	// defaultBatchMax bounds Promote, Rescue and Prune when Max is 0.
	defaultBatchMax = 1000
	// defaultListLimit bounds JobList and AuditList when Limit is 0.
	defaultListLimit = 100
)

// insertColumns are the parallel arrays JobInsertMany unnests.
type insertColumns struct {
	kind, queue, args, metadata []string
	priority                    []int16
	runAt                       []pgtype.Timestamptz
	maxAttempts                 []int32
	idemKey, flowKey, subject   []pgtype.Text
	batchID                     []pgtype.Int8
}

func newInsertColumns(params []*keeldriver.JobInsertParams) insertColumns {
	var c insertColumns
	for _, p := range params {
		c.kind = append(c.kind, p.Kind)
		c.queue = append(c.queue, cmp.Or(p.Queue, defaultQueue))
		c.args = append(c.args, jsonOr(p.Args, "{}"))
		c.metadata = append(c.metadata, jsonOr(p.Metadata, "{}"))
		c.priority = append(c.priority, int16(cmp.Or(p.Priority, defaultPriority)))
		c.runAt = append(c.runAt, nullTime(p.RunAt))
		c.maxAttempts = append(c.maxAttempts, int32(cmp.Or(p.MaxAttempts, defaultMaxAttempts)))
		c.idemKey = append(c.idemKey, nullText(p.IdempotencyKey))
		c.flowKey = append(c.flowKey, nullText(p.FlowKey))
		c.batchID = append(c.batchID, nullInt8(p.BatchID))
		c.subject = append(c.subject, nullText(p.Subject))
	}
	return c
}

func jsonOr(b json.RawMessage, def string) string {
	if len(b) == 0 {
		return def
	}
	return string(b)
}

// JobInsertMany inserts every job in one statement; results follow input
// order. An existing idempotency key returns the stored job as Duplicate.
func (e *executor) JobInsertMany(ctx context.Context, params []*keeldriver.JobInsertParams) ([]keeldriver.JobInsertResult, error) {
	if len(params) == 0 {
		return nil, nil
	}
	return e.insertMany(ctx, params, "", nil)
}

// JobInsertManyNotify pipelines the insert and one pg_notify per queue in
// one batch: one round trip, and one transaction (the pipeline's implicit
// one, or the caller's), so the notification is delivered on commit.
func (e *executor) JobInsertManyNotify(ctx context.Context, params []*keeldriver.JobInsertParams, topic string, queues []string) ([]keeldriver.JobInsertResult, error) {
	if len(params) == 0 {
		return nil, nil
	}
	return e.insertMany(ctx, params, topic, queues)
}

func (e *executor) insertMany(ctx context.Context, params []*keeldriver.JobInsertParams, topic string, queues []string) ([]keeldriver.JobInsertResult, error) {
	c := newInsertColumns(params)
	args := []any{c.kind, c.queue, c.args, c.metadata, c.priority, c.runAt, c.maxAttempts, c.idemKey, c.flowKey, c.batchID, c.subject}
	var got []scannedJob
	var err error
	if len(queues) == 0 {
		var rows pgx.Rows
		if rows, err = e.db.Query(ctx, sqlJobInsertMany, args...); err == nil {
			got, err = scanJobs(rows)
		}
	} else {
		got, err = e.insertAndNotify(ctx, args, topic, queues)
	}
	if err != nil {
		return nil, fmt.Errorf("keelpgx: inserting jobs: %w", err)
	}
	results := make([]keeldriver.JobInsertResult, len(params))
	for _, g := range got {
		results[g.Ord-1] = keeldriver.JobInsertResult{Job: g.Job, Duplicate: g.Duplicate}
	}
	if err := e.fillLateDuplicates(ctx, params, results); err != nil {
		return nil, fmt.Errorf("keelpgx: inserting jobs: %w", err)
	}
	return results, nil
}

func (e *executor) insertAndNotify(ctx context.Context, args []any, topic string, queues []string) ([]scannedJob, error) {
	if e.d.closed.Load() {
		return nil, keeldriver.ErrClosed
	}
	channel, err := e.d.channel(ctx, topic)
	if err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	b.Queue(sqlJobInsertMany, args...)
	for _, q := range queues {
		b.Queue(sqlNotify, channel, q)
	}
	br := e.db.SendBatch(ctx, b)
	var got []scannedJob
	rows, err := br.Query()
	if err == nil {
		got, err = scanJobs(rows)
	}
	for range queues {
		if err != nil {
			break
		}
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return got, err
}

// fillLateDuplicates resolves inputs that conflicted with a row committed
// after the insert's snapshot: ON CONFLICT saw it, the snapshot did not.
func (e *executor) fillLateDuplicates(ctx context.Context, params []*keeldriver.JobInsertParams, results []keeldriver.JobInsertResult) error {
	var kinds, keys []string
	for i, r := range results {
		if r.Job == nil {
			kinds = append(kinds, params[i].Kind)
			keys = append(keys, params[i].IdempotencyKey)
		}
	}
	if len(kinds) == 0 {
		return nil
	}
	rows, err := e.db.Query(ctx, sqlJobGetByIdempotencyKeys, kinds, keys)
	if err != nil {
		return err
	}
	got, err := scanJobs(rows)
	if err != nil {
		return err
	}
	for i := range results {
		if results[i].Job != nil {
			continue
		}
		idx := slices.IndexFunc(got, func(g scannedJob) bool {
			return g.Job.Kind == params[i].Kind && g.Job.IdempotencyKey == params[i].IdempotencyKey
		})
		if idx < 0 {
			return fmt.Errorf("job %d of the batch (kind %s) was neither inserted nor found", i, params[i].Kind)
		}
		results[i] = keeldriver.JobInsertResult{Job: got[idx].Job, Duplicate: true}
	}
	return nil
}

// JobClaim claims up to Max jobs of a queue in one statement and returns
// them in (priority, id) order, which UPDATE ... RETURNING does not keep.
func (e *executor) JobClaim(ctx context.Context, p *keeldriver.JobClaimParams) ([]*keeltype.JobRow, error) {
	if p.Max <= 0 {
		return nil, nil
	}
	if p.LeaseDuration <= 0 {
		return nil, fmt.Errorf("keelpgx: claiming jobs: lease duration %v: %w", p.LeaseDuration, keeltype.ErrInvalidArgument)
	}
	rows, err := e.db.Query(ctx, sqlJobClaim, p.Queue, p.Max, p.Owner, micros(p.LeaseDuration), nullTime(p.Now))
	if err != nil {
		return nil, fmt.Errorf("keelpgx: claiming jobs: %w", err)
	}
	jobs, err := jobsOf(rows)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: claiming jobs: %w", err)
	}
	slices.SortFunc(jobs, func(a, b *keeltype.JobRow) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.ID, b.ID))
	})
	return jobs, nil
}

// JobInsertClaimed inserts one job already claimed (keeldriver.InsertClaimer).
func (e *executor) JobInsertClaimed(ctx context.Context, p *keeldriver.JobInsertClaimedParams) (*keeltype.JobRow, error) {
	if err := keeldriver.ValidateClaimedInsert(p); err != nil {
		return nil, fmt.Errorf("keelpgx: inserting a claimed job: %w", err)
	}
	j := p.Job
	rows, err := e.db.Query(ctx, sqlJobInsertClaimed, j.Kind, cmp.Or(j.Queue, defaultQueue), jsonOr(j.Args, "{}"),
		jsonOr(j.Metadata, "{}"), int16(cmp.Or(j.Priority, defaultPriority)),
		int32(cmp.Or(j.MaxAttempts, defaultMaxAttempts)), nullText(j.Subject),
		p.Owner, micros(p.LeaseDuration))
	if err != nil {
		return nil, fmt.Errorf("keelpgx: inserting a claimed job: %w", err)
	}
	jobs, err := jobsOf(rows)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: inserting a claimed job: %w", err)
	}
	if len(jobs) == 0 {
		return nil, nil // the queue is paused
	}
	return jobs[0], nil
}

func jobsOf(rows pgx.Rows) ([]*keeltype.JobRow, error) {
	got, err := scanJobs(rows)
	if err != nil {
		return nil, err
	}
	jobs := make([]*keeltype.JobRow, len(got))
	for i, g := range got {
		jobs[i] = g.Job
	}
	return jobs, nil
}

// JobHeartbeat extends the leases still held; see JobHeartbeatParams.
func (e *executor) JobHeartbeat(ctx context.Context, p *keeldriver.JobHeartbeatParams) ([]int64, error) {
	if len(p.IDs) != len(p.Fences) {
		return nil, fmt.Errorf("keelpgx: heartbeat: %d ids but %d fences: %w", len(p.IDs), len(p.Fences), keeltype.ErrInvalidArgument)
	}
	if len(p.IDs) == 0 {
		return nil, nil
	}
	rows, err := e.db.Query(ctx, sqlJobHeartbeat, p.IDs, p.Fences, micros(p.LeaseDuration), nullTime(p.Now), p.Owner)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: heartbeat: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("keelpgx: heartbeat: %w", err)
	}
	return ids, nil
}

// JobGet returns one job or ErrNotFound.
func (e *executor) JobGet(ctx context.Context, id int64) (*keeltype.JobRow, error) {
	rows, err := e.db.Query(ctx, sqlJobGet, id)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: getting job %d: %w", id, err)
	}
	jobs, err := jobsOf(rows)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: getting job %d: %w", id, err)
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("keelpgx: getting job %d: %w", id, keeltype.ErrNotFound)
	}
	return jobs[0], nil
}

// JobList pages jobs in id order; see JobListParams.
func (e *executor) JobList(ctx context.Context, p *keeldriver.JobListParams) ([]*keeltype.JobRow, error) {
	query := sqlJobListAsc
	switch {
	case p.FlowKey != "" && p.Desc:
		query = sqlJobListKeyDesc
	case p.FlowKey != "":
		query = sqlJobListKeyAsc
	case p.Desc:
		query = sqlJobListDesc
	}
	limit := p.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	rows, err := e.db.Query(ctx, query, nullStrings(p.States), nullStrings(p.Kinds), nullStrings(p.Queues),
		nullText(p.FlowKey), nullInt8(p.BatchID), nullInt8(p.AfterID), nullInt8(p.BeforeID), limit)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: listing jobs: %w", err)
	}
	jobs, err := jobsOf(rows)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: listing jobs: %w", err)
	}
	return jobs, nil
}

// JobFinalizedCounts counts jobs finalized in (Since, Until] by state.
func (e *executor) JobFinalizedCounts(ctx context.Context, p *keeldriver.JobFinalizedCountsParams) (map[keeltype.JobState]int64, error) {
	rows, err := e.db.Query(ctx, queries.Get("JobFinalizedCounts"), p.Since, p.Until)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: counting finalized jobs: %w", err)
	}
	defer rows.Close()
	out := map[keeltype.JobState]int64{}
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("keelpgx: counting finalized jobs: %w", err)
		}
		if n > 0 {
			out[keeltype.JobState(st)] += n
		}
	}
	return out, rows.Err()
}

// JobPrune deletes up to Max final jobs finalized before Before.
func (e *executor) JobPrune(ctx context.Context, p *keeldriver.JobPruneParams) (int, error) {
	tag, err := e.db.Exec(ctx, sqlJobPrune, p.Before, batchMax(p.Max))
	if err != nil {
		return 0, fmt.Errorf("keelpgx: pruning jobs: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

func batchMax(n int) int {
	if n <= 0 {
		return defaultBatchMax
	}
	return n
}

// singleOutcome interprets the one-row result of the cancel, retry and
// delete statements: applied, refused (with the job's state), or missing.
func singleOutcome(rows pgx.Rows, id int64, action string) (*keeltype.JobRow, error) {
	got, err := scanJobs(rows)
	if err != nil {
		return nil, err
	}
	if len(got) == 0 {
		return nil, keeltype.ErrNotFound
	}
	if !got[0].Applied {
		return nil, &keeltype.InvalidStateError{JobID: id, Action: action, State: got[0].Job.State}
	}
	return got[0].Job, nil
}

// JobCancel cancels a non-running job at once and flags a running one.
func (e *executor) JobCancel(ctx context.Context, p *keeldriver.JobCancelParams) (*keeltype.JobRow, error) {
	return e.control(ctx, "cancel", "cancelling", p.ID, sqlJobCancel, p.ID, nullTime(p.Now))
}

// JobRetry makes a stopped or parked job available now.
func (e *executor) JobRetry(ctx context.Context, p *keeldriver.JobRetryParams) (*keeltype.JobRow, error) {
	return e.control(ctx, "retry", "retrying", p.ID, sqlJobRetry, p.ID, nullTime(p.Now))
}

// JobDelete deletes a job that is not running and returns it.
func (e *executor) JobDelete(ctx context.Context, id int64) (*keeltype.JobRow, error) {
	return e.control(ctx, "delete", "deleting", id, sqlJobDelete, id)
}

func (e *executor) control(ctx context.Context, action, verb string, id int64, query string, args ...any) (*keeltype.JobRow, error) {
	rows, err := e.db.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: %s job %d: %w", verb, id, err)
	}
	job, err := singleOutcome(rows, id, action)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: %s job %d: %w", verb, id, err)
	}
	return job, nil
}

// JobWake wakes waiting jobs by ids (narrowed by flow key and wait reason
// when set) or by flow key (and wait reason). Two statements, not one with
// optional filters: a generic plan of "$1 IS NULL OR id = ANY($1)" cannot
// look the ids up by primary key.
func (e *executor) JobWake(ctx context.Context, p *keeldriver.JobWakeParams) ([]int64, error) {
	var rows pgx.Rows
	var err error
	switch {
	case len(p.IDs) > 0:
		rows, err = e.db.Query(ctx, sqlJobWakeIDs, p.IDs, nullText(p.FlowKey), nullText(p.WaitReason), nullTime(p.Now))
	case p.FlowKey != "":
		rows, err = e.db.Query(ctx, sqlJobWakeFlow, p.FlowKey, nullText(p.WaitReason), nullTime(p.Now))
	default:
		return nil, fmt.Errorf("keelpgx: waking jobs: ids or flow key required: %w", keeltype.ErrInvalidArgument)
	}
	if err != nil {
		return nil, fmt.Errorf("keelpgx: waking jobs: %w", err)
	}
	woken, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("keelpgx: waking jobs: %w", err)
	}
	slices.Sort(woken)
	return woken, nil
}

// JobPromote makes due work available; returns the queues touched.
func (e *executor) JobPromote(ctx context.Context, p *keeldriver.JobPromoteParams) ([]string, error) {
	rows, err := e.db.Query(ctx, sqlJobPromote, batchMax(p.Max), nullTime(p.Now))
	if err != nil {
		return nil, fmt.Errorf("keelpgx: promoting jobs: %w", err)
	}
	queues, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("keelpgx: promoting jobs: %w", err)
	}
	return queues, nil
}

// JobRescue returns running jobs with expired leases to the pool (or to
// manual when out of attempts) and returns them as updated.
func (e *executor) JobRescue(ctx context.Context, p *keeldriver.JobRescueParams) ([]*keeltype.JobRow, error) {
	rows, err := e.db.Query(ctx, sqlJobRescue, batchMax(p.Max), nullTime(p.Now))
	if err != nil {
		return nil, fmt.Errorf("keelpgx: rescuing jobs: %w", err)
	}
	jobs, err := jobsOf(rows)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: rescuing jobs: %w", err)
	}
	return jobs, nil
}
