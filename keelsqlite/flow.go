package keelsqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// executor is both the pool executor and the transaction executor, so one
// assertion covers both.
var _ keeldriver.FlowExecutor = (*executor)(nil)

// defaultFlowKeyListLimit is FlowKeyList's page size when Limit is unset.
const defaultFlowKeyListLimit = 100

// FlowKeysAvailable lists keys with available jobs by a skip scan of
// keel_job_key_claim_idx (see queries/flow.sql): "" (jobs without a flow
// key) first when present, then keys after After, then wrapping around up
// to and including After. Limit <= 0 returns nothing.
func (e *executor) FlowKeysAvailable(ctx context.Context, p *keeldriver.FlowKeysAvailableParams) ([]string, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	var keys []string
	err := e.read(ctx, "listing available flow keys", false, func(q dbtx) (err error) {
		keys, err = collectStrings(q.QueryContext(ctx, queries.Get("FlowKeysAvailable"),
			sql.Named("queue", p.Queue), sql.Named("after", p.After), sql.Named("limit", p.Limit)))
		return err
	})
	if err != nil {
		return nil, err
	}
	return keys, nil
}

// claimWant is one element of JobClaimKeys' :wanted array.
type claimWant struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

// JobClaimKeys claims up to Ns[i] jobs of each Keys[i] in one statement
// (inside the caller's transaction on a transaction executor). A repeated
// key is claimed once with the counts added up. Rows come back grouped by
// key in the order of Keys (a repeated key at its first position), each
// key's jobs in (priority, id) order.
func (e *executor) JobClaimKeys(ctx context.Context, p *keeldriver.JobClaimKeysParams) ([]*keeltype.JobRow, error) {
	if len(p.Keys) != len(p.Ns) {
		return nil, fmt.Errorf("keelsqlite: claiming jobs by flow key: %d keys but %d counts: %w",
			len(p.Keys), len(p.Ns), keeltype.ErrInvalidArgument)
	}
	if p.LeaseDuration <= 0 {
		return nil, fmt.Errorf("keelsqlite: claiming jobs by flow key: lease duration %s: %w",
			p.LeaseDuration, keeltype.ErrInvalidArgument)
	}
	pos := make(map[string]int, len(p.Keys))
	var wanted []claimWant
	for i, k := range p.Keys {
		if p.Ns[i] <= 0 {
			continue
		}
		if j, ok := pos[k]; ok {
			wanted[j].N += p.Ns[i]
			continue
		}
		pos[k] = len(wanted)
		wanted = append(wanted, claimWant{Key: k, N: p.Ns[i]})
	}
	if len(wanted) == 0 {
		return nil, nil
	}
	encoded, err := json.Marshal(wanted)
	if err != nil {
		return nil, fmt.Errorf("keelsqlite: claiming jobs by flow key: %w", err)
	}
	now := resolveNow(p.Now)
	var jobs []*keeltype.JobRow
	err = e.write(ctx, "claiming jobs by flow key", func(q dbtx) (err error) {
		jobs, err = collectJobs(q.QueryContext(ctx, queries.Get("JobClaimKeys"),
			sql.Named("wanted", string(encoded)),
			sql.Named("queue", p.Queue),
			sql.Named("owner", p.Owner),
			sql.Named("lease_expires_at", micros(now.Add(p.LeaseDuration))),
			sql.Named("now", micros(now)),
		))
		return err
	})
	if err != nil {
		return nil, err
	}
	// RETURNING order is unspecified in SQLite.
	slices.SortFunc(jobs, func(a, b *keeltype.JobRow) int {
		return cmp.Or(cmp.Compare(pos[a.FlowKey], pos[b.FlowKey]),
			cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.ID, b.ID))
	})
	return jobs, nil
}

// FlowKeysLock creates missing state rows and returns the rows of Keys in
// key order with their running counts.
//
// SQLite has no row locks: the database has one writer, and the insert that
// creates missing rows is a write, so from that statement on (from BEGIN on
// in a transaction from Begin, which is IMMEDIATE) this transaction holds
// the write lock until it ends. That serializes every other FlowKeysLock,
// claim and save, which is what the row locks stand for on PostgreSQL. Rows
// are therefore never held by another transaction when this runs, and
// SkipLocked has nothing to skip: every key comes back either way. On the
// pool executor the call is its own transaction, so nothing stays locked
// after it returns.
func (e *executor) FlowKeysLock(ctx context.Context, p *keeldriver.FlowKeysLockParams) ([]*keeltype.FlowKeyRow, error) {
	if len(p.Keys) == 0 {
		return nil, nil
	}
	keys, err := json.Marshal(p.Keys)
	if err != nil {
		return nil, fmt.Errorf("keelsqlite: locking flow keys: %w", err)
	}
	now := resolveNow(p.Now)
	var rows []*keeltype.FlowKeyRow
	err = e.write(ctx, "locking flow keys", func(q dbtx) error {
		_, err := q.ExecContext(ctx, queries.Get("FlowKeysEnsure"),
			sql.Named("keys", string(keys)), sql.Named("now", micros(now)))
		if err != nil {
			return err
		}
		rows, err = collectFlowKeys(q.QueryContext(ctx, queries.Get("FlowKeysGet"), sql.Named("keys", string(keys))))
		return err
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// FlowKeysSave writes every state field of rows with one prepared statement
// in one transaction (a savepoint inside the caller's) and sets updated_at to
// now. Running is not stored. Rows without a state row are ignored:
// FlowKeysLock creates them.
func (e *executor) FlowKeysSave(ctx context.Context, rows []*keeltype.FlowKeyRow, now *time.Time) error {
	if len(rows) == 0 {
		return nil
	}
	at := micros(resolveNow(now))
	return e.write(ctx, "saving flow keys", func(q dbtx) error {
		save, err := q.PrepareContext(ctx, queries.Get("FlowKeySave"))
		if err != nil {
			return err
		}
		defer save.Close()
		for _, r := range rows {
			if _, err := save.ExecContext(ctx, flowKeySaveArgs(r, at)...); err != nil {
				return fmt.Errorf("key %q: %w", r.Key, invalidOnCheck(err))
			}
		}
		return nil
	})
}

func flowKeySaveArgs(r *keeltype.FlowKeyRow, now int64) []any {
	return []any{
		sql.Named("key", r.Key),
		sql.Named("tokens", r.Tokens),
		sql.Named("tokens_at", nullMicros(r.TokensAt)),
		sql.Named("paused_at", nullMicros(r.PausedAt)),
		sql.Named("paused_by", r.PausedBy),
		sql.Named("pause_reason", r.PauseReason),
		sql.Named("pause_context", jsonOr(r.PauseContext, "{}")),
		sql.Named("breaker_state", string(cmp.Or(r.BreakerState, keeltype.BreakerClosed))),
		sql.Named("breaker_opened_at", nullMicros(r.BreakerOpenedAt)),
		sql.Named("breaker_probes_left", r.BreakerProbesLeft),
		sql.Named("consecutive_failures", r.ConsecutiveFailures),
		sql.Named("window_start", nullMicros(r.WindowStart)),
		sql.Named("window_calls", r.WindowCalls),
		sql.Named("window_failures", r.WindowFailures),
		sql.Named("ramp_started_at", nullMicros(r.RampStartedAt)),
		sql.Named("last_error", r.LastError),
		sql.Named("last_failure_class", r.LastFailureClass),
		sql.Named("last_failure_at", nullMicros(r.LastFailureAt)),
		sql.Named("last_success_at", nullMicros(r.LastSuccessAt)),
		sql.Named("now", now),
	}
}

// FlowKeyGet returns one key's state with its running count, or
// keeltype.ErrNotFound.
func (e *executor) FlowKeyGet(ctx context.Context, key string) (*keeltype.FlowKeyRow, error) {
	keys, err := json.Marshal([]string{key})
	if err != nil {
		return nil, fmt.Errorf("keelsqlite: getting flow key %q: %w", key, err)
	}
	var row *keeltype.FlowKeyRow
	err = e.read(ctx, fmt.Sprintf("getting flow key %q", key), false, func(q dbtx) error {
		rows, err := collectFlowKeys(q.QueryContext(ctx, queries.Get("FlowKeysGet"), sql.Named("keys", string(keys))))
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return keeltype.ErrNotFound
		}
		row = rows[0]
		return nil
	})
	if err != nil {
		return nil, err
	}
	return row, nil
}

// FlowKeyList pages key states in key order with their running counts
// (Limit 0 = 100).
func (e *executor) FlowKeyList(ctx context.Context, p *keeldriver.FlowKeyListParams) ([]*keeltype.FlowKeyRow, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = defaultFlowKeyListLimit
	}
	args := []any{
		sql.Named("from", max(p.Prefix, p.After)),
		sql.Named("after", nullString(p.After)),
		sql.Named("prefix", p.Prefix),
		sql.Named("only_paused", p.OnlyPaused),
		sql.Named("only_tripped", p.OnlyTripped),
		sql.Named("hide_finished", p.HideFinishedBatches),
		sql.Named("limit", limit),
	}
	var rows []*keeltype.FlowKeyRow
	err := e.read(ctx, "listing flow keys", false, func(q dbtx) (err error) {
		rows, err = collectFlowKeys(q.QueryContext(ctx, queries.Get("FlowKeyList"), args...))
		return err
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// FlowKeyStats returns one entry per distinct key, in the order given: job
// counts by state (states without jobs absent), the oldest available run_at
// and the key's state row if it has one. "" matches no job: jobs without a
// flow key have no per-key picture (counting them would scan the table).
// Both reads share one snapshot.
func (e *executor) FlowKeyStats(ctx context.Context, keys []string) ([]*keeltype.FlowKeyStats, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	var out []*keeltype.FlowKeyStats
	byKey := make(map[string]*keeltype.FlowKeyStats, len(keys))
	for _, k := range keys {
		if _, ok := byKey[k]; !ok {
			s := &keeltype.FlowKeyStats{Key: k, Counts: map[keeltype.JobState]int64{}}
			byKey[k] = s
			out = append(out, s)
		}
	}
	encoded, err := json.Marshal(keys)
	if err != nil {
		return nil, fmt.Errorf("keelsqlite: reading flow key stats: %w", err)
	}
	err = e.read(ctx, "reading flow key stats", true, func(q dbtx) error {
		if err := countKeyJobs(ctx, q, string(encoded), byKey); err != nil {
			return err
		}
		states, err := collectFlowKeys(q.QueryContext(ctx, queries.Get("FlowKeysGet"), sql.Named("keys", string(encoded))))
		if err != nil {
			return err
		}
		for _, st := range states {
			byKey[st.Key].State = st
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func countKeyJobs(ctx context.Context, q dbtx, keys string, byKey map[string]*keeltype.FlowKeyStats) error {
	rows, err := q.QueryContext(ctx, queries.Get("FlowKeyStats"), sql.Named("keys", keys))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			key, state string
			n          int64
			oldest     sql.NullInt64
		)
		if err := rows.Scan(&key, &state, &n, &oldest); err != nil {
			return err
		}
		s := byKey[key]
		s.Counts[keeltype.JobState(state)] = n
		if oldest.Valid {
			s.OldestAvailable = timePtr(oldest)
		}
	}
	return rows.Err()
}

// FlowLimitUpsert stores limit under (Pattern, Queue), replacing every field
// of an existing one, and returns it as stored: durations at millisecond
// precision, Weight 0 as 1, UpdatedAt zero as now. Values out of range are
// keeltype.ErrInvalidArgument.
func (e *executor) FlowLimitUpsert(ctx context.Context, l *keeltype.FlowLimit) (*keeltype.FlowLimit, error) {
	if l == nil || l.Pattern == "" {
		return nil, fmt.Errorf("keelsqlite: storing flow limit: pattern required: %w", keeltype.ErrInvalidArgument)
	}
	what := fmt.Sprintf("storing flow limit %q (queue %q)", l.Pattern, l.Queue)
	ramp, err := encodeRamp(l.Ramp)
	if err != nil {
		return nil, fmt.Errorf("keelsqlite: %s: %w", what, err)
	}
	at := l.UpdatedAt
	if at.IsZero() {
		at = time.Now()
	}
	var out *keeltype.FlowLimit
	err = e.write(ctx, what, func(q dbtx) (err error) {
		out, err = scanFlowLimit(q.QueryRowContext(ctx, queries.Get("FlowLimitUpsert"),
			sql.Named("pattern", l.Pattern),
			sql.Named("queue", l.Queue),
			sql.Named("rate", l.Rate),
			sql.Named("burst", l.Burst),
			sql.Named("max_running", l.MaxRunning),
			sql.Named("breaker_failures", l.BreakerFailures),
			sql.Named("breaker_ratio", l.BreakerRatio),
			sql.Named("breaker_window_ms", l.BreakerWindow.Milliseconds()),
			sql.Named("breaker_min_calls", l.BreakerMinCalls),
			sql.Named("breaker_cooldown_ms", l.BreakerCooldown.Milliseconds()),
			sql.Named("breaker_probes", l.BreakerProbes),
			sql.Named("autopause_failures", l.AutoPauseFailures),
			sql.Named("weight", cmp.Or(l.Weight, 1)),
			sql.Named("ramp", ramp),
			sql.Named("updated_at", micros(at)),
			sql.Named("updated_by", l.UpdatedBy),
		))
		return invalidOnCheck(err)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FlowLimitDelete removes the limit of (pattern, queue), or
// keeltype.ErrNotFound.
func (e *executor) FlowLimitDelete(ctx context.Context, pattern, queue string) error {
	return e.write(ctx, fmt.Sprintf("deleting flow limit %q (queue %q)", pattern, queue), func(q dbtx) error {
		res, err := q.ExecContext(ctx, queries.Get("FlowLimitDelete"),
			sql.Named("pattern", pattern), sql.Named("queue", queue))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return keeltype.ErrNotFound
		}
		return nil
	})
}

// FlowLimitList returns every limit ordered by (pattern, queue).
func (e *executor) FlowLimitList(ctx context.Context) ([]*keeltype.FlowLimit, error) {
	var out []*keeltype.FlowLimit
	err := e.read(ctx, "listing flow limits", false, func(q dbtx) error {
		rows, err := q.QueryContext(ctx, queries.Get("FlowLimitList"))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			l, err := scanFlowLimit(rows)
			if err != nil {
				return err
			}
			out = append(out, l)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// JobAgePriorities raises up to Max (0 = 1000) long-available jobs by one
// priority level; see keeldriver.FlowExecutor.JobAgePriorities.
func (e *executor) JobAgePriorities(ctx context.Context, p *keeldriver.JobAgeParams) (int, error) {
	if p.Interval <= 0 {
		return 0, fmt.Errorf("keelsqlite: ageing priorities: interval %s: %w", p.Interval, keeltype.ErrInvalidArgument)
	}
	now := resolveNow(p.Now)
	var n int64
	err := e.write(ctx, "ageing priorities", func(q dbtx) error {
		res, err := q.ExecContext(ctx, queries.Get("JobAgePriorities"),
			sql.Named("now", micros(now)),
			sql.Named("interval", p.Interval.Microseconds()),
			sql.Named("max", batchMax(p.Max)))
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

// invalidOnCheck marks a CHECK constraint violation (a value out of range)
// as keeltype.ErrInvalidArgument, keeping the SQLite error in the chain.
func invalidOnCheck(err error) error {
	var coded interface{ Code() int }
	if errors.As(err, &coded) && coded.Code() == sqlite3.SQLITE_CONSTRAINT_CHECK {
		return fmt.Errorf("%w: %w", keeltype.ErrInvalidArgument, err)
	}
	return err
}

// rampStep is a keeltype.RampStep as stored in keel_flow_limit.ramp: After in
// milliseconds, like the other durations of the table.
type rampStep struct {
	After int64   `json:"after"`
	Rate  float64 `json:"rate"`
}

func encodeRamp(steps []keeltype.RampStep) (string, error) {
	out := make([]rampStep, len(steps))
	for i, s := range steps {
		out[i] = rampStep{After: s.After.Milliseconds(), Rate: s.Rate}
	}
	b, err := json.Marshal(out)
	return string(b), err
}

func decodeRamp(s string) ([]keeltype.RampStep, error) {
	var in []rampStep
	if err := json.Unmarshal([]byte(s), &in); err != nil {
		return nil, fmt.Errorf("decoding ramp: %w", err)
	}
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]keeltype.RampStep, len(in))
	for i, st := range in {
		out[i] = keeltype.RampStep{After: time.Duration(st.After) * time.Millisecond, Rate: st.Rate}
	}
	return out, nil
}

// scanFlowLimit reads the column list of the keel_flow_limit statements.
func scanFlowLimit(s scanner) (*keeltype.FlowLimit, error) {
	var (
		l                    keeltype.FlowLimit
		windowMs, coolMs, at int64
		ramp                 string
	)
	err := s.Scan(&l.Pattern, &l.Queue, &l.Rate, &l.Burst, &l.MaxRunning, &l.BreakerFailures, &l.BreakerRatio,
		&windowMs, &l.BreakerMinCalls, &coolMs, &l.BreakerProbes, &l.AutoPauseFailures, &l.Weight, &ramp,
		&at, &l.UpdatedBy)
	if err != nil {
		return nil, err
	}
	l.BreakerWindow = time.Duration(windowMs) * time.Millisecond
	l.BreakerCooldown = time.Duration(coolMs) * time.Millisecond
	if l.Ramp, err = decodeRamp(ramp); err != nil {
		return nil, err
	}
	l.UpdatedAt = fromMicros(at)
	return &l, nil
}

// scanFlowKey reads the column list of the keel_flow_key statements, running
// count last.
func scanFlowKey(s scanner) (*keeltype.FlowKeyRow, error) {
	var (
		r                                                                 keeltype.FlowKeyRow
		tokensAt, pausedAt, openedAt, windowStart, rampAt, failAt, succAt sql.NullInt64
		pauseContext, breaker                                             string
		updatedAt                                                         int64
	)
	err := s.Scan(&r.Key, &r.Tokens, &tokensAt, &pausedAt, &r.PausedBy, &r.PauseReason, &pauseContext,
		&breaker, &openedAt, &r.BreakerProbesLeft, &r.ConsecutiveFailures, &windowStart, &r.WindowCalls,
		&r.WindowFailures, &rampAt, &r.LastError, &r.LastFailureClass, &failAt, &succAt, &updatedAt, &r.Running)
	if err != nil {
		return nil, err
	}
	r.TokensAt = timePtr(tokensAt)
	r.PausedAt = timePtr(pausedAt)
	r.PauseContext = json.RawMessage(pauseContext)
	r.BreakerState = keeltype.BreakerState(breaker)
	r.BreakerOpenedAt = timePtr(openedAt)
	r.WindowStart = timePtr(windowStart)
	r.RampStartedAt = timePtr(rampAt)
	r.LastFailureAt = timePtr(failAt)
	r.LastSuccessAt = timePtr(succAt)
	r.UpdatedAt = fromMicros(updatedAt)
	return &r, nil
}

func collectFlowKeys(rows *sql.Rows, err error) ([]*keeltype.FlowKeyRow, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*keeltype.FlowKeyRow
	for rows.Next() {
		r, err := scanFlowKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// collectStrings collects a single text column.
func collectStrings(rows *sql.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
