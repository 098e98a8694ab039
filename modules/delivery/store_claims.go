package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/keelwork/keel/keelsql"
)

// claimRow is one claim as the statement reads it.
type claimRow struct {
	ID         int64    `json:"id"`
	From       []Status `json:"from"`
	Version    int64    `json:"version"`
	Sender     string   `json:"sender"`
	Token      string   `json:"token"`
	JobID      int64    `json:"job_id"`
	BatchID    int64    `json:"batch_id"`
	ConnID     string   `json:"conn_id"`
	Outer      string   `json:"outer_id"`
	Deadline   string   `json:"deadline"`    // PostgreSQL: RFC 3339
	DeadlineUS int64    `json:"deadline_us"` // SQLite: unix microseconds
	Event      event    `json:"event"`
}

// claimMany runs one batch of claims and returns the claimed records by id.
func (s *store[TTx]) claimMany(ctx context.Context, batch []claimReq) (map[int64]*Record, error) {
	at := now()
	rows := make([]claimRow, len(batch))
	for i, q := range batch {
		c := q.c
		rows[i] = claimRow{ID: c.ID, From: c.From, Version: c.Version, Sender: c.Sender, Token: c.Token, JobID: c.JobID,
			BatchID: c.BatchID, ConnID: c.ConnID, Outer: c.OuterID, Deadline: c.Deadline.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano),
			DeadlineUS: c.Deadline.UnixMicro(), Event: event{At: at, Event: "claimed", By: c.Sender, Conn: c.ConnID, Detail: c.Token}}
	}
	raw, err := json.Marshal(rows)
	if err != nil {
		return nil, err
	}
	res, err := s.db.Query(ctx, s.q.Get("RecordClaimMany"), string(raw), at)
	recs, err := keelsql.CollectRows(res, err, func(r keelsql.Rows) (*Record, error) { return scanRecord(r) })
	if err != nil {
		return nil, fmt.Errorf("claiming %d records: %w", len(batch), err)
	}
	out := make(map[int64]*Record, len(recs))
	for _, r := range recs {
		out[r.ID] = r
	}
	return out, nil
}
