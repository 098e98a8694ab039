package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/keelwork/keel/keelsql"
)

type heldApp struct {
	AppID int64 `json:"app_id"`
	Conns int   `json:"conns"`
}

// beat records this instance's held applications and forgets the others.
// Application 0 marks the instance itself as alive; a nil held (stopping)
// removes every row of the instance.
func (s *store[TTx]) beat(ctx context.Context, instance string, held []heldApp) error {
	if held != nil {
		held = append([]heldApp{{AppID: 0}}, held...)
	}
	ids := make([]int64, len(held))
	for i, h := range held {
		ids[i] = h.AppID
	}
	if len(held) > 0 {
		if _, err := s.db.Exec(ctx, s.q.Get("PresenceBeat"), jsonList(held), instance, now()); err != nil {
			return fmt.Errorf("presence heartbeat: %w", err)
		}
	}
	if _, err := s.db.Exec(ctx, s.q.Get("PresenceDrop"), instance, jsonList(ids)); err != nil {
		return fmt.Errorf("presence drop: %w", err)
	}
	return nil
}

type presenceRow struct {
	AppID    int64
	Instance string
}

// livePresence lists (application, instance) pairs whose heartbeat is
// newer than since.
func (s *store[TTx]) livePresence(ctx context.Context, since time.Time) ([]presenceRow, error) {
	rows, err := s.db.Query(ctx, s.q.Get("PresenceLive"), since)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (presenceRow, error) {
		var p presenceRow
		return p, r.Scan(&p.AppID, &p.Instance)
	})
}
