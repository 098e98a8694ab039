package keelpgx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/keelwork/keel/keeltype"
)

// scannedJob is one job row plus the statement's extra columns (ord,
// duplicate, applied) when it has them.
type scannedJob struct {
	Job       *keeltype.JobRow
	Ord       int64
	Duplicate bool
	Applied   bool
}

// jobScanner holds scan targets for the nullable and JSON columns. Columns
// are matched by name so statements can return j.* whatever the column
// order, and unknown columns (from a later migration) are ignored.
type jobScanner struct {
	out                                                    scannedJob
	row                                                    keeltype.JobRow
	state                                                  string
	leaseOwner, idemKey, flowKey, subject, waitReason      pgtype.Text
	batchID                                                pgtype.Int8
	leaseExpiresAt, waitDeadline, attemptedAt, finalizedAt pgtype.Timestamptz
	runAt, createdAt                                       time.Time
	args, metadata, result, errs                           []byte
	ignored                                                any
}

func (s *jobScanner) target(name string) any {
	switch name {
	case "ord":
		return &s.out.Ord
	case "duplicate":
		return &s.out.Duplicate
	case "applied":
		return &s.out.Applied
	case "id":
		return &s.row.ID
	case "kind":
		return &s.row.Kind
	case "queue":
		return &s.row.Queue
	case "args":
		return &s.args
	case "metadata":
		return &s.metadata
	case "state":
		return &s.state
	case "priority":
		return &s.row.Priority
	case "run_at":
		return &s.runAt
	case "attempt":
		return &s.row.Attempt
	case "max_attempts":
		return &s.row.MaxAttempts
	case "fence":
		return &s.row.Fence
	case "lease_owner":
		return &s.leaseOwner
	case "lease_expires_at":
		return &s.leaseExpiresAt
	case "idempotency_key":
		return &s.idemKey
	case "flow_key":
		return &s.flowKey
	case "batch_id":
		return &s.batchID
	case "subject":
		return &s.subject
	case "wait_reason":
		return &s.waitReason
	case "wait_deadline":
		return &s.waitDeadline
	case "needs_check":
		return &s.row.NeedsCheck
	case "cancel_requested":
		return &s.row.CancelRequested
	case "result":
		return &s.result
	case "errors":
		return &s.errs
	case "created_at":
		return &s.createdAt
	case "attempted_at":
		return &s.attemptedAt
	case "finalized_at":
		return &s.finalizedAt
	}
	return &s.ignored
}

// scanJobs reads every row of rows and closes it.
func scanJobs(rows pgx.Rows) ([]scannedJob, error) {
	defer rows.Close()
	var s jobScanner
	fields := rows.FieldDescriptions()
	dest := make([]any, len(fields))
	for i, f := range fields {
		dest[i] = s.target(f.Name)
	}
	var out []scannedJob
	for rows.Next() {
		s = jobScanner{}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		job, err := s.finish()
		if err != nil {
			return nil, err
		}
		out = append(out, job)
	}
	return out, rows.Err()
}

func (s *jobScanner) finish() (scannedJob, error) {
	r := s.row
	r.State = keeltype.JobState(s.state)
	r.Args = cloneJSON(s.args)
	r.Metadata = cloneJSON(s.metadata)
	r.Result = cloneJSON(s.result)
	r.RunAt = s.runAt.UTC()
	r.CreatedAt = s.createdAt.UTC()
	r.LeaseOwner = s.leaseOwner.String
	r.IdempotencyKey = s.idemKey.String
	r.FlowKey = s.flowKey.String
	r.Subject = s.subject.String
	r.WaitReason = s.waitReason.String
	r.BatchID = s.batchID.Int64
	r.LeaseExpiresAt = timePtr(s.leaseExpiresAt)
	r.WaitDeadline = timePtr(s.waitDeadline)
	r.AttemptedAt = timePtr(s.attemptedAt)
	r.FinalizedAt = timePtr(s.finalizedAt)
	if len(s.errs) > 0 {
		if err := json.Unmarshal(s.errs, &r.Errors); err != nil {
			return scannedJob{}, fmt.Errorf("decoding errors of job %d: %w", r.ID, err)
		}
	}
	out := s.out
	out.Job = &r
	return out, nil
}

// cloneJSON copies so the row never aliases a driver buffer; NULL stays nil.
func cloneJSON(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(bytes.Clone(b))
}

func timePtr(t pgtype.Timestamptz) *time.Time {
	if !t.Valid {
		return nil
	}
	u := t.Time.UTC()
	return &u
}

// Parameter helpers: Go zero values that mean "none" become SQL NULL.

func nullText(s string) pgtype.Text { return pgtype.Text{String: s, Valid: s != ""} }

func nullInt8(v int64) pgtype.Int8 { return pgtype.Int8{Int64: v, Valid: v != 0} }

func nullTime(t *time.Time) pgtype.Timestamptz {
	if t == nil {
		return pgtype.Timestamptz{}
	}
	return pgtype.Timestamptz{Time: *t, Valid: true}
}

// nullStrings is NULL for an empty list: "no filter", not "match nothing".
func nullStrings[S ~string](v []S) []string {
	if len(v) == 0 {
		return nil
	}
	out := make([]string, len(v))
	for i, s := range v {
		out[i] = string(s)
	}
	return out
}

func micros(d time.Duration) int64 { return d.Microseconds() }
