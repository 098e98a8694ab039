package keelpgx

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// LeaderAttemptElect reports whether LeaderID holds Name after the call.
func (e *executor) LeaderAttemptElect(ctx context.Context, p *keeldriver.LeaderElectParams) (bool, error) {
	if p.TTL <= 0 {
		return false, fmt.Errorf("keelpgx: electing leader: ttl %v: %w", p.TTL, keeltype.ErrInvalidArgument)
	}
	var holder string
	err := e.db.QueryRow(ctx, sqlLeaderAttemptElect, p.Name, p.LeaderID, micros(p.TTL), nullTime(p.Now)).Scan(&holder)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil // another leader holds an unexpired lease
	}
	if err != nil {
		return false, fmt.Errorf("keelpgx: electing leader %s: %w", p.Name, err)
	}
	return holder == p.LeaderID, nil
}

// LeaderResign gives up Name if LeaderID holds it; otherwise does nothing.
func (e *executor) LeaderResign(ctx context.Context, p *keeldriver.LeaderElectParams) error {
	if _, err := e.db.Exec(ctx, sqlLeaderResign, p.Name, p.LeaderID); err != nil {
		return fmt.Errorf("keelpgx: resigning leader %s: %w", p.Name, err)
	}
	return nil
}

// LeaderGet returns the lease row (possibly expired) or ErrNotFound.
func (e *executor) LeaderGet(ctx context.Context, name string) (*keeldriver.LeaderRow, error) {
	var l keeldriver.LeaderRow
	err := e.db.QueryRow(ctx, sqlLeaderGet, name).Scan(&l.Name, &l.LeaderID, &l.ElectedAt, &l.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("keelpgx: getting leader %s: %w", name, keeltype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("keelpgx: getting leader %s: %w", name, err)
	}
	l.ElectedAt, l.ExpiresAt = l.ElectedAt.UTC(), l.ExpiresAt.UTC()
	return &l, nil
}
