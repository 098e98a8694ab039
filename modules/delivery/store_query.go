package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/keelwork/keel/keelsql"
)

// listRecords returns one page of the filter, newest first.
func (s *store[TTx]) listRecords(ctx context.Context, f *Filter, limit, offset int) ([]*Record, error) {
	args := append(f.args(nil), limit, offset)
	rows, err := s.db.Query(ctx, s.q.Get("RecordList"), args...)
	out, err := keelsql.CollectRows(rows, err, scanRecordView)
	if err != nil {
		return nil, fmt.Errorf("listing records: %w", err)
	}
	return out, nil
}

func (s *store[TTx]) countRecords(ctx context.Context, f *Filter, snapshot *time.Time) (int64, error) {
	var n int64
	if err := s.db.QueryRow(ctx, s.q.Get("RecordCount"), f.args(snapshot)...).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting records: %w", err)
	}
	return n, nil
}

// previewRow is one (status, application) group of a preview.
type previewRow struct {
	Status   Status
	AppID    int64
	Count    int64
	Earliest time.Time
}

func (s *store[TTx]) previewRecords(ctx context.Context, f *Filter, snapshot time.Time) ([]previewRow, error) {
	rows, err := s.db.Query(ctx, s.q.Get("RecordPreview"), f.args(&snapshot)...)
	out, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (previewRow, error) {
		var p previewRow
		return p, r.Scan(&p.Status, &p.AppID, &p.Count, &p.Earliest)
	})
	if err != nil {
		return nil, fmt.Errorf("previewing records: %w", err)
	}
	return out, nil
}

// subjectRow is an eligible record as a task materializes it.
type subjectRow struct {
	ID      int64
	AppID   int64
	Status  Status
	Version int64
}

// subjectPage reads one keyset page of eligible records after id.
func (s *store[TTx]) subjectPage(ctx context.Context, f *Filter, snapshot time.Time, after int64, limit int) ([]subjectRow, error) {
	args := append(f.args(&snapshot), jsonList(RequeueStatuses), after, limit)
	rows, err := s.db.Query(ctx, s.q.Get("RecordSubjects"), args...)
	out, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (subjectRow, error) {
		var p subjectRow
		return p, r.Scan(&p.ID, &p.AppID, &p.Status, &p.Version)
	})
	if err != nil {
		return nil, fmt.Errorf("reading task subjects: %w", err)
	}
	return out, nil
}

// countAwaitingACK is the number of records written and awaiting the
// customer's ACK (the console's home).
func (s *store[TTx]) countAwaitingACK(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRow(ctx, s.q.Get("HomeAwaitingACK")).Scan(&n); err != nil {
		return 0, fmt.Errorf("delivery: counting records awaiting ACK: %w", err)
	}
	return n, nil
}

// oldestWaiting is when the oldest undelivered record was created; false
// when there is none.
func (s *store[TTx]) oldestWaiting(ctx context.Context) (time.Time, bool, error) {
	var since time.Time
	switch err := s.db.QueryRow(ctx, s.q.Get("HomeOldestWaiting")).Scan(&since); {
	case err == nil:
		return since, true, nil
	case isNoRows(err):
		return time.Time{}, false, nil
	default:
		return time.Time{}, false, fmt.Errorf("delivery: reading the oldest waiting record: %w", err)
	}
}
