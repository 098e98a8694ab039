package delivery

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/keelwork/keel"
)

// subjectPageSize is how many records one materialization read takes.
const subjectPageSize = 1000

// source is the requeue task's keel.BatchSource: the filter snapshot of
// delivery records. Preview counts exactly the filter (a status filter is
// never widened); Subjects emits the eligible records (every status but
// awaiting_ack) created at or before the snapshot, with their frozen
// status and version.
type source[TTx any] struct{ m *Module[TTx] }

var _ keel.BatchSource[Filter] = source[any]{}

// Kind implements keel.BatchSource.
func (source[TTx]) Kind() string { return BatchKind }

// Preview implements keel.BatchSource.
func (s source[TTx]) Preview(ctx context.Context, f Filter, snapshot time.Time) (*keel.BatchPreview, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	rows, err := s.m.st.previewRecords(ctx, &f, snapshot)
	if err != nil {
		return nil, err
	}
	pv := &keel.BatchPreview{ByState: map[string]int64{}}
	apps := map[int64]bool{}
	for _, r := range rows {
		pv.Hits += r.Count
		pv.ByState[string(r.Status)] += r.Count
		if pv.Earliest == nil || r.Earliest.Before(*pv.Earliest) {
			e := r.Earliest
			pv.Earliest = &e
		}
		if r.Status.Requeueable() {
			pv.Eligible += r.Count
			apps[r.AppID] = true
		} else {
			pv.RuleSkipped += r.Count
		}
	}
	pv.DistinctKeys = int64(len(apps))
	return pv, nil
}

// Subjects implements keel.BatchSource. It reads in keyset pages, each
// closed before its records are emitted (SQLite has one writer).
func (s source[TTx]) Subjects(ctx context.Context, f Filter, snapshot time.Time, emit func(string, string, keel.JobArgs) error) error {
	if err := f.Validate(); err != nil {
		return err
	}
	var after int64
	for {
		page, err := s.m.st.subjectPage(ctx, &f, snapshot, after, subjectPageSize)
		if err != nil {
			return err
		}
		for _, r := range page {
			args := RequeueArgs{DeliveryID: r.ID, AppID: r.AppID, FrozenStatus: r.Status, FrozenVersion: r.Version, SnapshotAt: snapshot}
			if err := emit(subjectOf(r.ID), appKey(r.AppID), args); err != nil {
				return err
			}
		}
		if len(page) < subjectPageSize {
			return nil
		}
		after = page[len(page)-1].ID
	}
}

// subjectOf is a record's item subject: zero-padded so that the engine's
// subject order is the records' order.
func subjectOf(id int64) string { return fmt.Sprintf("%012d", id) }

func recordOfSubject(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }
