package keelsqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/keelwork/keel/keeltype"
)

// Timestamps are stored as INTEGER unix microseconds (UTC), PostgreSQL's
// precision, so both drivers round-trip the same values.

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

// nullMicros maps nil to NULL.
func nullMicros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func timePtr(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

// nullString stores "" as NULL: optional text columns are NULL when unset so
// that partial indexes and unique constraints ignore them.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullInt(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

// jsonOr returns raw as text, or def when raw is empty.
func jsonOr(raw json.RawMessage, def any) any {
	if len(raw) == 0 {
		return def
	}
	return string(raw)
}

// resolveNow is the "database clock" of this driver: SQLite runs in-process,
// so the process clock is the authority.
func resolveNow(p *time.Time) time.Time {
	if p != nil {
		return p.UTC()
	}
	return time.Now().UTC()
}

// scanner is *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// scanJob reads the column list shared by every job statement in job.sql.
func scanJob(s scanner) (*keeltype.JobRow, error) {
	var (
		j                                              keeltype.JobRow
		args, metadata, errs                           string
		state                                          string
		runAt, createdAt                               int64
		leaseOwner, idemKey, flowKey, subject, waitRsn sql.NullString
		result                                         sql.NullString
		leaseExp, waitDeadline, attemptedAt, finalized sql.NullInt64
		batchID                                        sql.NullInt64
	)
	err := s.Scan(&j.ID, &j.Kind, &j.Queue, &args, &metadata, &state, &j.Priority, &runAt,
		&j.Attempt, &j.MaxAttempts, &j.Fence, &leaseOwner, &leaseExp, &idemKey, &flowKey,
		&batchID, &subject, &waitRsn, &waitDeadline, &j.NeedsCheck, &j.CancelRequested,
		&result, &errs, &createdAt, &attemptedAt, &finalized)
	if err != nil {
		return nil, err
	}
	j.Args = json.RawMessage(args)
	j.Metadata = json.RawMessage(metadata)
	j.State = keeltype.JobState(state)
	j.RunAt = fromMicros(runAt)
	j.LeaseOwner = leaseOwner.String
	j.LeaseExpiresAt = timePtr(leaseExp)
	j.IdempotencyKey = idemKey.String
	j.FlowKey = flowKey.String
	j.BatchID = batchID.Int64
	j.Subject = subject.String
	j.WaitReason = waitRsn.String
	j.WaitDeadline = timePtr(waitDeadline)
	if result.Valid {
		j.Result = json.RawMessage(result.String)
	}
	if err := json.Unmarshal([]byte(errs), &j.Errors); err != nil {
		return nil, fmt.Errorf("decoding errors of job %d: %w", j.ID, err)
	}
	j.CreatedAt = fromMicros(createdAt)
	j.AttemptedAt = timePtr(attemptedAt)
	j.FinalizedAt = timePtr(finalized)
	return &j, nil
}

// collectJobs scans the job rows of a query, closing them.
func collectJobs(rows *sql.Rows, err error) ([]*keeltype.JobRow, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*keeltype.JobRow
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// collectInt64s collects a single integer column.
func collectInt64s(rows *sql.Rows, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func scanQueue(s scanner) (*keeltype.QueueRow, error) {
	var (
		q                  keeltype.QueueRow
		pausedAt           sql.NullInt64
		pausedBy           sql.NullString
		created, updatedAt int64
	)
	if err := s.Scan(&q.Name, &pausedAt, &pausedBy, &created, &updatedAt); err != nil {
		return nil, err
	}
	q.PausedAt = timePtr(pausedAt)
	q.PausedBy = pausedBy.String
	q.CreatedAt = fromMicros(created)
	q.UpdatedAt = fromMicros(updatedAt)
	return &q, nil
}

func scanAudit(s scanner) (*keeltype.AuditRow, error) {
	var (
		a       keeltype.AuditRow
		at      int64
		context string
	)
	if err := s.Scan(&a.ID, &at, &a.Actor, &a.Action, &a.Target, &a.Reason, &context); err != nil {
		return nil, err
	}
	a.At = fromMicros(at)
	a.Context = json.RawMessage(context)
	return &a, nil
}
