package reservation

import (
	"context"
	"fmt"
	"time"

	"github.com/keelwork/keel/keelsql"
)

// Candidate is a reservation claimed for release (or, for lapsed holds,
// expiry) inside a transaction that holds its row.
type Candidate struct {
	ID         int64
	SlotID     int64
	UserID     string
	CategoryID string
	Version    int64
	// Due is the release point (or the hold's expiry).
	Due time.Time
}

// failure is a candidate this attempt could not release.
type failure struct {
	c       Candidate
	err     error
	restore bool // the inventory restore failed (counted apart)
}

// pass is what one release attempt shares across its transactions: the
// instant it judges by, who acts, the categories and the policy.
type pass struct {
	now    time.Time
	path   string // scan, precise, assist, compensation
	actor  string
	cats   map[string]*Category
	policy *Policy
}

// newPass reads categories and the policy once per attempt.
func (m *Module[TTx]) newPass(ctx context.Context, path string) (*pass, error) {
	cats, err := m.categories(ctx, m.st.db)
	if err != nil {
		return nil, err
	}
	pol, err := m.policy(ctx, m.st.db)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*Category, len(cats))
	for _, c := range cats {
		byID[c.ID] = c
	}
	return &pass{now: m.now(), path: path, actor: "system:reservation." + path, cats: byID, policy: pol}, nil
}

// mode is the release mode of a category (off when unknown).
func (p *pass) mode(category string) Mode {
	if c, ok := p.cats[category]; ok {
		return c.ReleaseMode
	}
	return ModeOff
}

// stage runs the test hook at a named point inside a release transaction.
func (m *Module[TTx]) stage(ctx context.Context, name string, q keelsql.Querier) error {
	if m.opt.stageHook == nil {
		return nil
	}
	if err := m.opt.stageHook(ctx, name, q); err != nil {
		return fmt.Errorf("stage %s: %w", name, err)
	}
	return nil
}
