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

// claimTaskToken claims a preview token's digest; false when it was
// claimed before (by this or a concurrent creation).
func (s *store[TTx]) claimTaskToken(ctx context.Context, digest, operator string) (bool, error) {
	var got string
	err := s.db.QueryRow(ctx, s.q.Get("TaskTokenClaim"), digest, operator, now()).Scan(&got)
	if isNoRows(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claiming the preview token: %w", err)
	}
	return true, nil
}

func (s *store[TTx]) setTaskToken(ctx context.Context, digest string, batchID int64) error {
	if _, err := s.db.Exec(ctx, s.q.Get("TaskTokenSet"), digest, batchID); err != nil {
		return fmt.Errorf("recording the preview token's task: %w", err)
	}
	return nil
}

func (s *store[TTx]) releaseTaskToken(ctx context.Context, digest string) error {
	_, err := s.db.Exec(ctx, s.q.Get("TaskTokenRelease"), digest)
	return err
}

// taskOfToken returns the task a claimed token created (0 while it is
// being created); found=false when the token is not claimed.
func (s *store[TTx]) taskOfToken(ctx context.Context, digest string) (int64, bool, error) {
	var id int64
	err := s.db.QueryRow(ctx, s.q.Get("TaskTokenGet"), digest).Scan(&id)
	if isNoRows(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the preview token's task: %w", err)
	}
	return id, true, nil
}
