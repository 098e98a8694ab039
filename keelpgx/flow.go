package keelpgx

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// Flow-control statements (queries/flow.sql), resolved at init like the
// others in queries.go.
var (
	sqlFlowKeysAvailable  = queries.Get("FlowKeysAvailable")
	sqlJobClaimKeys       = queries.Get("JobClaimKeys")
	sqlFlowKeysEnsureSkip = queries.Get("FlowKeysEnsureSkip")
	sqlFlowKeysEnsureWait = queries.Get("FlowKeysEnsureWait")
	sqlFlowKeysLockSkip   = queries.Get("FlowKeysLockSkip")
	sqlFlowKeysLockWait   = queries.Get("FlowKeysLockWait")
	sqlFlowKeysSave       = queries.Get("FlowKeysSave")
	sqlFlowKeysGet        = queries.Get("FlowKeysGet")
	sqlFlowKeyList        = queries.Get("FlowKeyList")
	sqlFlowKeyStats       = queries.Get("FlowKeyStats")
	sqlFlowLimitUpsert    = queries.Get("FlowLimitUpsert")
	sqlFlowLimitDelete    = queries.Get("FlowLimitDelete")
	sqlFlowLimitList      = queries.Get("FlowLimitList")
	sqlJobAgePriorities   = queries.Get("JobAgePriorities")
)

var (
	_ keeldriver.FlowExecutor = (*executor)(nil)
	_ keeldriver.FlowExecutor = (*executorTx)(nil)
)

// defaultFlowWeight is keel_flow_limit.weight for a FlowLimit with Weight 0
// (the column requires 1..1000).
const defaultFlowWeight = 1

// pgCheckViolation is SQLSTATE check_violation: a limit value out of range.
const pgCheckViolation = "23514"

// FlowKeysAvailable lists keys with available jobs by a skip scan of
// keel_job_key_claim_idx: "" (jobs without a flow key) first when present,
// then keys after After, then wrapping around up to and including After.
// Limit <= 0 returns nothing.
func (e *executor) FlowKeysAvailable(ctx context.Context, p *keeldriver.FlowKeysAvailableParams) ([]string, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	rows, err := e.claim.Query(ctx, sqlFlowKeysAvailable, p.Queue, p.After, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: listing available flow keys: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("keelpgx: listing available flow keys: %w", err)
	}
	return keys, nil
}

// JobClaimKeys claims up to Ns[i] jobs of each Keys[i] in one statement.
// Rows come back grouped by key in the order of Keys (a repeated key at its
// first position), each key's jobs in (priority, id) order.
func (e *executor) JobClaimKeys(ctx context.Context, p *keeldriver.JobClaimKeysParams) ([]*keeltype.JobRow, error) {
	if len(p.Keys) != len(p.Ns) {
		return nil, fmt.Errorf("keelpgx: claiming jobs by flow key: %d keys but %d counts: %w",
			len(p.Keys), len(p.Ns), keeltype.ErrInvalidArgument)
	}
	if p.LeaseDuration <= 0 {
		return nil, fmt.Errorf("keelpgx: claiming jobs by flow key: lease duration %v: %w",
			p.LeaseDuration, keeltype.ErrInvalidArgument)
	}
	pos := make(map[string]int, len(p.Keys))
	ns := make([]int32, len(p.Ns))
	total := 0
	for i, k := range p.Keys {
		if _, ok := pos[k]; !ok {
			pos[k] = i
		}
		ns[i] = int32(max(p.Ns[i], 0))
		total += int(ns[i])
	}
	if total == 0 {
		return nil, nil
	}
	rows, err := e.claim.Query(ctx, sqlJobClaimKeys, p.Keys, ns, p.Queue, p.Owner, micros(p.LeaseDuration), nullTime(p.Now))
	if err != nil {
		return nil, fmt.Errorf("keelpgx: claiming jobs by flow key: %w", err)
	}
	jobs, err := jobsOf(rows)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: claiming jobs by flow key: %w", err)
	}
	slices.SortFunc(jobs, func(a, b *keeltype.JobRow) int {
		return cmp.Or(cmp.Compare(pos[a.FlowKey], pos[b.FlowKey]),
			cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.ID, b.ID))
	})
	return jobs, nil
}

// FlowKeysLock creates missing state rows, then locks the rows in key order
// and returns them with their running counts. The locks last as long as the
// transaction: on the pool executor each statement is its own transaction,
// so the rows come back but are unlocked at once (only useful for reading).
// Rows are created by a first statement and locked by a second because a
// statement cannot see rows its own INSERT ... ON CONFLICT added. With
// SkipLocked neither statement waits, not even for a transaction that is
// creating the same key (see FlowKeysEnsureSkip): that key is skipped.
func (e *executor) FlowKeysLock(ctx context.Context, p *keeldriver.FlowKeysLockParams) ([]*keeltype.FlowKeyRow, error) {
	if len(p.Keys) == 0 {
		return nil, nil
	}
	ensure, lock := sqlFlowKeysEnsureWait, sqlFlowKeysLockWait
	if p.SkipLocked {
		ensure, lock = sqlFlowKeysEnsureSkip, sqlFlowKeysLockSkip
	}
	if _, err := e.db.Exec(ctx, ensure, p.Keys, nullTime(p.Now)); err != nil {
		return nil, fmt.Errorf("keelpgx: creating flow key rows: %w", err)
	}
	rows, err := e.db.Query(ctx, lock, p.Keys)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: locking flow keys: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanFlowKey)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: locking flow keys: %w", err)
	}
	return list, nil
}

// flowKeyColumns are the parallel arrays FlowKeysSave unnests.
type flowKeyColumns struct {
	key, pausedBy, pauseReason, pauseContext, breakerState, lastError, lastFailureClass []string
	tokens                                                                              []float64
	tokensAt, pausedAt, breakerOpenedAt, windowStart, rampStartedAt                     []pgtype.Timestamptz
	lastFailureAt, lastSuccessAt                                                        []pgtype.Timestamptz
	probesLeft, consecutiveFailures, windowCalls, windowFailures                        []int32
}

func newFlowKeyColumns(rows []*keeltype.FlowKeyRow) flowKeyColumns {
	var c flowKeyColumns
	for _, r := range rows {
		c.key = append(c.key, r.Key)
		c.tokens = append(c.tokens, r.Tokens)
		c.tokensAt = append(c.tokensAt, nullTime(r.TokensAt))
		c.pausedAt = append(c.pausedAt, nullTime(r.PausedAt))
		c.pausedBy = append(c.pausedBy, r.PausedBy)
		c.pauseReason = append(c.pauseReason, r.PauseReason)
		c.pauseContext = append(c.pauseContext, jsonOr(r.PauseContext, "{}"))
		c.breakerState = append(c.breakerState, string(cmp.Or(r.BreakerState, keeltype.BreakerClosed)))
		c.breakerOpenedAt = append(c.breakerOpenedAt, nullTime(r.BreakerOpenedAt))
		c.probesLeft = append(c.probesLeft, int32(r.BreakerProbesLeft))
		c.consecutiveFailures = append(c.consecutiveFailures, int32(r.ConsecutiveFailures))
		c.windowStart = append(c.windowStart, nullTime(r.WindowStart))
		c.windowCalls = append(c.windowCalls, int32(r.WindowCalls))
		c.windowFailures = append(c.windowFailures, int32(r.WindowFailures))
		c.rampStartedAt = append(c.rampStartedAt, nullTime(r.RampStartedAt))
		c.lastError = append(c.lastError, r.LastError)
		c.lastFailureClass = append(c.lastFailureClass, r.LastFailureClass)
		c.lastFailureAt = append(c.lastFailureAt, nullTime(r.LastFailureAt))
		c.lastSuccessAt = append(c.lastSuccessAt, nullTime(r.LastSuccessAt))
	}
	return c
}

// FlowKeysSave writes every state field of rows in one statement and sets
// updated_at to now (database clock when nil). Running is not stored. Rows
// without a state row are ignored: FlowKeysLock creates them.
func (e *executor) FlowKeysSave(ctx context.Context, rows []*keeltype.FlowKeyRow, now *time.Time) error {
	if len(rows) == 0 {
		return nil
	}
	c := newFlowKeyColumns(rows)
	_, err := e.db.Exec(ctx, sqlFlowKeysSave, c.key, c.tokens, c.tokensAt, c.pausedAt, c.pausedBy,
		c.pauseReason, c.pauseContext, c.breakerState, c.breakerOpenedAt, c.probesLeft,
		c.consecutiveFailures, c.windowStart, c.windowCalls, c.windowFailures, c.rampStartedAt,
		c.lastError, c.lastFailureClass, c.lastFailureAt, c.lastSuccessAt, nullTime(now))
	if err != nil {
		return fmt.Errorf("keelpgx: saving flow keys: %w", invalidOnCheck(err))
	}
	return nil
}

// FlowKeyGet returns one key's state with its running count, or ErrNotFound.
func (e *executor) FlowKeyGet(ctx context.Context, key string) (*keeltype.FlowKeyRow, error) {
	list, err := e.flowKeysGet(ctx, []string{key})
	if err != nil {
		return nil, fmt.Errorf("keelpgx: getting flow key %q: %w", key, err)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("keelpgx: getting flow key %q: %w", key, keeltype.ErrNotFound)
	}
	return list[0], nil
}

func (e *executor) flowKeysGet(ctx context.Context, keys []string) ([]*keeltype.FlowKeyRow, error) {
	rows, err := e.db.Query(ctx, sqlFlowKeysGet, keys)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanFlowKey)
}

// FlowKeyList pages key states in key order (Limit 0 = defaultListLimit).
func (e *executor) FlowKeyList(ctx context.Context, p *keeldriver.FlowKeyListParams) ([]*keeltype.FlowKeyRow, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	rows, err := e.db.Query(ctx, sqlFlowKeyList, nullText(p.Prefix), nullText(p.After), limit, p.OnlyPaused, p.OnlyTripped,
		p.HideFinishedBatches)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: listing flow keys: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanFlowKey)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: listing flow keys: %w", err)
	}
	return list, nil
}

// FlowKeyStats returns one entry per distinct key, in the order given:
// counts by state (states without jobs absent), the oldest available run_at
// and the key's state row if it has one. "" matches no job: jobs without a
// flow key have no per-key picture (counting them would scan the table).
func (e *executor) FlowKeyStats(ctx context.Context, keys []string) ([]*keeltype.FlowKeyStats, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	var out []*keeltype.FlowKeyStats
	byKey := make(map[string]*keeltype.FlowKeyStats, len(keys))
	for _, k := range keys {
		if _, ok := byKey[k]; ok {
			continue
		}
		s := &keeltype.FlowKeyStats{Key: k, Counts: map[keeltype.JobState]int64{}}
		byKey[k] = s
		out = append(out, s)
	}
	rows, err := e.db.Query(ctx, sqlFlowKeyStats, keys)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: flow key stats: %w", err)
	}
	var (
		key, state string
		count      int64
		oldest     pgtype.Timestamptz
	)
	_, err = pgx.ForEachRow(rows, []any{&key, &state, &count, &oldest}, func() error {
		s := byKey[key]
		s.Counts[keeltype.JobState(state)] = count
		if oldest.Valid {
			s.OldestAvailable = timePtr(oldest)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("keelpgx: flow key stats: %w", err)
	}
	states, err := e.flowKeysGet(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: flow key stats: %w", err)
	}
	for _, st := range states {
		byKey[st.Key].State = st
	}
	return out, nil
}

// scanFlowKey reads the column list shared by the keel_flow_key statements.
func scanFlowKey(row pgx.CollectableRow) (*keeltype.FlowKeyRow, error) {
	var (
		r                                                                 keeltype.FlowKeyRow
		tokensAt, pausedAt, openedAt, windowStart, rampAt, failAt, succAt pgtype.Timestamptz
		pauseContext                                                      []byte
		breaker                                                           string
		running                                                           int64
	)
	err := row.Scan(&r.Key, &r.Tokens, &tokensAt, &pausedAt, &r.PausedBy, &r.PauseReason, &pauseContext,
		&breaker, &openedAt, &r.BreakerProbesLeft, &r.ConsecutiveFailures, &windowStart, &r.WindowCalls,
		&r.WindowFailures, &rampAt, &r.LastError, &r.LastFailureClass, &failAt, &succAt, &r.UpdatedAt, &running)
	if err != nil {
		return nil, err
	}
	r.TokensAt = timePtr(tokensAt)
	r.PausedAt = timePtr(pausedAt)
	r.PauseContext = cloneJSON(pauseContext)
	r.BreakerState = keeltype.BreakerState(breaker)
	r.BreakerOpenedAt = timePtr(openedAt)
	r.WindowStart = timePtr(windowStart)
	r.RampStartedAt = timePtr(rampAt)
	r.LastFailureAt = timePtr(failAt)
	r.LastSuccessAt = timePtr(succAt)
	r.UpdatedAt = r.UpdatedAt.UTC()
	r.Running = int(running)
	return &r, nil
}

// rampStepJSON is a RampStep as stored in keel_flow_limit.ramp: After in
// milliseconds, like the other durations of the table.
type rampStepJSON struct {
	After int64   `json:"after"`
	Rate  float64 `json:"rate"`
}

func encodeRamp(steps []keeltype.RampStep) (string, error) {
	out := make([]rampStepJSON, len(steps))
	for i, s := range steps {
		out[i] = rampStepJSON{After: s.After.Milliseconds(), Rate: s.Rate}
	}
	b, err := json.Marshal(out)
	return string(b), err
}

func decodeRamp(b []byte) ([]keeltype.RampStep, error) {
	var in []rampStepJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("decoding ramp: %w", err)
	}
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]keeltype.RampStep, len(in))
	for i, s := range in {
		out[i] = keeltype.RampStep{After: time.Duration(s.After) * time.Millisecond, Rate: s.Rate}
	}
	return out, nil
}

func scanFlowLimit(row pgx.CollectableRow) (*keeltype.FlowLimit, error) {
	var (
		l                keeltype.FlowLimit
		windowMs, coolMs int64
		ramp             []byte
	)
	err := row.Scan(&l.Pattern, &l.Queue, &l.Rate, &l.Burst, &l.MaxRunning, &l.BreakerFailures, &l.BreakerRatio,
		&windowMs, &l.BreakerMinCalls, &coolMs, &l.BreakerProbes, &l.AutoPauseFailures, &l.Weight, &ramp,
		&l.UpdatedAt, &l.UpdatedBy)
	if err != nil {
		return nil, err
	}
	l.BreakerWindow = time.Duration(windowMs) * time.Millisecond
	l.BreakerCooldown = time.Duration(coolMs) * time.Millisecond
	if l.Ramp, err = decodeRamp(ramp); err != nil {
		return nil, err
	}
	l.UpdatedAt = l.UpdatedAt.UTC()
	return &l, nil
}

// FlowLimitUpsert stores limit under (Pattern, Queue), replacing every field
// of an existing one, and returns it as stored: durations at millisecond
// precision, Weight 0 as 1, UpdatedAt zero as the database clock. Values out
// of range are ErrInvalidArgument.
func (e *executor) FlowLimitUpsert(ctx context.Context, l *keeltype.FlowLimit) (*keeltype.FlowLimit, error) {
	if l == nil || l.Pattern == "" {
		return nil, fmt.Errorf("keelpgx: storing flow limit: pattern required: %w", keeltype.ErrInvalidArgument)
	}
	verb := fmt.Sprintf("storing flow limit %q (queue %q)", l.Pattern, l.Queue)
	ramp, err := encodeRamp(l.Ramp)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: %s: %w", verb, err)
	}
	var at pgtype.Timestamptz
	if !l.UpdatedAt.IsZero() {
		at = pgtype.Timestamptz{Time: l.UpdatedAt, Valid: true}
	}
	weight := l.Weight
	if weight == 0 {
		weight = defaultFlowWeight
	}
	rows, err := e.db.Query(ctx, sqlFlowLimitUpsert, l.Pattern, l.Queue, l.Rate, l.Burst, l.MaxRunning,
		l.BreakerFailures, l.BreakerRatio, l.BreakerWindow.Milliseconds(), l.BreakerMinCalls,
		l.BreakerCooldown.Milliseconds(), l.BreakerProbes, l.AutoPauseFailures, weight, ramp, at, l.UpdatedBy)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: %s: %w", verb, invalidOnCheck(err))
	}
	stored, err := pgx.CollectExactlyOneRow(rows, scanFlowLimit)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: %s: %w", verb, invalidOnCheck(err))
	}
	return stored, nil
}

// FlowLimitDelete removes the limit of (pattern, queue), or ErrNotFound.
func (e *executor) FlowLimitDelete(ctx context.Context, pattern, queue string) error {
	tag, err := e.db.Exec(ctx, sqlFlowLimitDelete, pattern, queue)
	if err != nil {
		return fmt.Errorf("keelpgx: deleting flow limit %q (queue %q): %w", pattern, queue, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("keelpgx: deleting flow limit %q (queue %q): %w", pattern, queue, keeltype.ErrNotFound)
	}
	return nil
}

// FlowLimitList returns every limit ordered by (pattern, queue).
func (e *executor) FlowLimitList(ctx context.Context) ([]*keeltype.FlowLimit, error) {
	rows, err := e.db.Query(ctx, sqlFlowLimitList)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: listing flow limits: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanFlowLimit)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: listing flow limits: %w", err)
	}
	return list, nil
}

// JobAgePriorities raises up to Max (0 = defaultBatchMax) long-available
// jobs by one priority level; see FlowExecutor.JobAgePriorities.
func (e *executor) JobAgePriorities(ctx context.Context, p *keeldriver.JobAgeParams) (int, error) {
	if p.Interval <= 0 {
		return 0, fmt.Errorf("keelpgx: ageing priorities: interval %v: %w", p.Interval, keeltype.ErrInvalidArgument)
	}
	tag, err := e.db.Exec(ctx, sqlJobAgePriorities, micros(p.Interval), batchMax(p.Max), nullTime(p.Now))
	if err != nil {
		return 0, fmt.Errorf("keelpgx: ageing priorities: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// invalidOnCheck marks a CHECK constraint violation as ErrInvalidArgument,
// keeping the database error in the chain.
func invalidOnCheck(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgCheckViolation {
		return fmt.Errorf("%w: %w", keeltype.ErrInvalidArgument, err)
	}
	return err
}
