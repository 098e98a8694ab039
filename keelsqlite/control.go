package keelsqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// QueuePause pauses a queue, creating its row if needed.
func (e *executor) QueuePause(ctx context.Context, p *keeldriver.QueuePauseParams) (*keeltype.QueueRow, error) {
	now := micros(resolveNow(p.Now))
	return e.queueUpsert(ctx, "pausing queue", queries.Get("QueuePause"),
		sql.Named("name", p.Name), sql.Named("by", nullString(p.By)), sql.Named("now", now))
}

// QueueResume resumes a queue, creating its row if needed.
func (e *executor) QueueResume(ctx context.Context, name string) (*keeltype.QueueRow, error) {
	now := micros(time.Now())
	return e.queueUpsert(ctx, "resuming queue", queries.Get("QueueResume"),
		sql.Named("name", name), sql.Named("now", now))
}

func (e *executor) queueUpsert(ctx context.Context, what, query string, args ...any) (*keeltype.QueueRow, error) {
	var row *keeltype.QueueRow
	err := e.write(ctx, what, func(q dbtx) (err error) {
		row, err = scanQueue(q.QueryRowContext(ctx, query, args...))
		return err
	})
	if err != nil {
		return nil, err
	}
	return row, nil
}

// QueueList writes a row for every queue named by a job (a queue exists
// implicitly) and lists all rows by name.
func (e *executor) QueueList(ctx context.Context) ([]*keeltype.QueueRow, error) {
	var out []*keeltype.QueueRow
	err := e.write(ctx, "listing queues", func(q dbtx) error {
		if _, err := q.ExecContext(ctx, queries.Get("QueueRegister"), sql.Named("now", micros(time.Now()))); err != nil {
			return err
		}
		var err error
		out, err = listQueues(ctx, q)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func listQueues(ctx context.Context, q dbtx) ([]*keeltype.QueueRow, error) {
	rows, err := q.QueryContext(ctx, queries.Get("QueueList"))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*keeltype.QueueRow
	for rows.Next() {
		row, err := scanQueue(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// QueueStats counts jobs per queue and state (every state present, zero when
// empty) and includes queues that only have a keel_queue row. Both reads
// share one snapshot.
func (e *executor) QueueStats(ctx context.Context) ([]*keeltype.QueueStats, error) {
	stats := map[string]*keeltype.QueueStats{}
	err := e.read(ctx, "reading queue stats", true, func(q dbtx) error {
		if err := countJobs(ctx, q, stats); err != nil {
			return err
		}
		queues, err := listQueues(ctx, q)
		if err != nil {
			return err
		}
		for _, row := range queues {
			statsFor(stats, row.Name).Paused = row.PausedAt != nil
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]*keeltype.QueueStats, 0, len(stats))
	for _, s := range stats {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Queue < out[j].Queue })
	return out, nil
}

func countJobs(ctx context.Context, q dbtx, stats map[string]*keeltype.QueueStats) error {
	rows, err := q.QueryContext(ctx, queries.Get("QueueStatsJobs"))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			queue, state string
			n            int64
			oldest       sql.NullInt64
		)
		if err := rows.Scan(&queue, &state, &n, &oldest); err != nil {
			return err
		}
		s := statsFor(stats, queue)
		s.Counts[keeltype.JobState(state)] = n
		if oldest.Valid {
			s.OldestAvailable = timePtr(oldest)
		}
	}
	return rows.Err()
}

func statsFor(stats map[string]*keeltype.QueueStats, queue string) *keeltype.QueueStats {
	s, ok := stats[queue]
	if !ok {
		// States without jobs are absent, as on PostgreSQL (the
		// conformance suite holds both to one shape).
		s = &keeltype.QueueStats{Queue: queue, Counts: map[keeltype.JobState]int64{}}
		stats[queue] = s
	}
	return s
}

// LeaderAttemptElect reports whether LeaderID holds Name after the call.
func (e *executor) LeaderAttemptElect(ctx context.Context, p *keeldriver.LeaderElectParams) (bool, error) {
	if p.TTL <= 0 {
		return false, fmt.Errorf("keelsqlite: electing leader: ttl %v: %w", p.TTL, keeltype.ErrInvalidArgument)
	}
	now := resolveNow(p.Now)
	elected := false
	err := e.write(ctx, "electing leader", func(q dbtx) error {
		var id string
		err := q.QueryRowContext(ctx, queries.Get("LeaderAttemptElect"),
			sql.Named("name", p.Name),
			sql.Named("leader_id", p.LeaderID),
			sql.Named("now", micros(now)),
			sql.Named("expires_at", micros(now.Add(p.TTL))),
		).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		elected = err == nil
		return err
	})
	return elected, err
}

// LeaderResign gives up Name if LeaderID holds it; otherwise nothing happens.
func (e *executor) LeaderResign(ctx context.Context, p *keeldriver.LeaderElectParams) error {
	return e.write(ctx, "resigning leadership", func(q dbtx) error {
		_, err := q.ExecContext(ctx, queries.Get("LeaderResign"),
			sql.Named("name", p.Name), sql.Named("leader_id", p.LeaderID))
		return err
	})
}

// LeaderGet returns the lease row (expired or not); none is ErrNotFound.
func (e *executor) LeaderGet(ctx context.Context, name string) (*keeldriver.LeaderRow, error) {
	var row keeldriver.LeaderRow
	err := e.read(ctx, "getting leader", false, func(q dbtx) error {
		var elected, expires int64
		err := q.QueryRowContext(ctx, queries.Get("LeaderGet"), sql.Named("name", name)).
			Scan(&row.Name, &row.LeaderID, &elected, &expires)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("leader %q: %w", name, keeltype.ErrNotFound)
		}
		row.ElectedAt, row.ExpiresAt = fromMicros(elected), fromMicros(expires)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &row, nil
}

// AuditInsert stores row (At zero = now, Context nil = {}) and returns it as
// stored.
func (e *executor) AuditInsert(ctx context.Context, row *keeltype.AuditRow) (*keeltype.AuditRow, error) {
	at := row.At
	if at.IsZero() {
		at = time.Now()
	}
	var out *keeltype.AuditRow
	err := e.write(ctx, "inserting audit row", func(q dbtx) (err error) {
		out, err = scanAudit(q.QueryRowContext(ctx, queries.Get("AuditInsert"),
			sql.Named("at", micros(at)),
			sql.Named("actor", row.Actor),
			sql.Named("action", row.Action),
			sql.Named("target", row.Target),
			sql.Named("reason", row.Reason),
			sql.Named("context", jsonOr(row.Context, "{}")),
		))
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AuditList lists audit rows newest first; Since and Until are inclusive.
func (e *executor) AuditList(ctx context.Context, p *keeldriver.AuditListParams) ([]*keeltype.AuditRow, error) {
	args := []any{
		sql.Named("before_id", openBound(p.BeforeID, math.MaxInt64)),
		sql.Named("since", nullMicros(p.Since)),
		sql.Named("until", nullMicros(p.Until)),
		sql.Named("actor", p.Actor),
		sql.Named("target", p.Target),
		sql.Named("action", p.Action),
		sql.Named("limit", openBound(int64(p.Limit), 100)),
	}
	var out []*keeltype.AuditRow
	err := e.read(ctx, "listing audit rows", false, func(q dbtx) error {
		rows, err := q.QueryContext(ctx, queries.Get("AuditList"), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			row, err := scanAudit(rows)
			if err != nil {
				return err
			}
			out = append(out, row)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// openBound is v, or def when v is unset (<= 0).
func openBound(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
}

// MigrationApplied lists applied migrations by line and version; before the
// first migration the table does not exist and the list is empty.
func (e *executor) MigrationApplied(ctx context.Context) ([]*keeldriver.MigrationRow, error) {
	var out []*keeldriver.MigrationRow
	err := e.read(ctx, "listing migrations", true, func(q dbtx) error {
		exists, err := tableExists(ctx, q, "keel_migration")
		if err != nil || !exists {
			return err
		}
		rows, err := q.QueryContext(ctx, queries.Get("MigrationApplied"))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m keeldriver.MigrationRow
			var at int64
			if err := rows.Scan(&m.Line, &m.Version, &m.Name, &at); err != nil {
				return err
			}
			m.AppliedAt = fromMicros(at)
			out = append(out, &m)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// MigrationRecord records one applied migration (AppliedAt zero = now).
func (e *executor) MigrationRecord(ctx context.Context, row *keeldriver.MigrationRow) error {
	at := row.AppliedAt
	if at.IsZero() {
		at = time.Now()
	}
	return e.write(ctx, "recording migration", func(q dbtx) error {
		_, err := q.ExecContext(ctx, queries.Get("MigrationRecord"),
			sql.Named("line", row.Line), sql.Named("version", row.Version),
			sql.Named("name", row.Name), sql.Named("applied_at", micros(at)))
		return err
	})
}

// MigrationForget removes the record of one migration (after its down step).
func (e *executor) MigrationForget(ctx context.Context, line string, version int) error {
	return e.write(ctx, "forgetting migration", func(q dbtx) error {
		_, err := q.ExecContext(ctx, queries.Get("MigrationForget"),
			sql.Named("line", line), sql.Named("version", version))
		return err
	})
}

// TableExists looks name up in sqlite_master.
func (e *executor) TableExists(ctx context.Context, name string) (bool, error) {
	var exists bool
	err := e.read(ctx, "checking table", false, func(q dbtx) (err error) {
		exists, err = tableExists(ctx, q, name)
		return err
	})
	return exists, err
}

func tableExists(ctx context.Context, q dbtx, name string) (bool, error) {
	var exists bool
	err := q.QueryRowContext(ctx, queries.Get("TableExists"), sql.Named("name", name)).Scan(&exists)
	return exists, err
}
