package reservation

import (
	"context"
	"fmt"
	"time"

	"github.com/keelwork/keel/keelsql"
)

func scanCategory(row scanner) (*Category, error) {
	c := &Category{}
	var bands, mode string
	if err := row.Scan(&c.ID, &c.NameZH, &c.NameEN, &c.GraceMinutes, &bands, &c.ReminderMinutes, &c.AppealMinutes,
		&c.HoldMinutes, &mode, &c.Version, &c.UpdatedAt, &c.UpdatedBy); err != nil {
		return nil, notFound(err)
	}
	var err error
	if c.Bands, err = ParseBands(bands); err != nil {
		return nil, fmt.Errorf("category %s: stored bands: %w", c.ID, err)
	}
	c.ReleaseMode = Mode(mode)
	return c, nil
}

// categories lists every category.
func (s *store[TTx]) categories(ctx context.Context, q keelsql.Querier) ([]*Category, error) {
	rows, err := q.Query(ctx, s.sql("CategoryList"))
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (*Category, error) { return scanCategory(r) })
}

// category reads one category; keeltype.ErrNotFound when there is none.
func (s *store[TTx]) category(ctx context.Context, q keelsql.Querier, id string) (*Category, error) {
	return scanCategory(q.QueryRow(ctx, s.sql("CategoryGet"), id))
}

// insertCategory adds a category; false when the id is taken.
func (s *store[TTx]) insertCategory(ctx context.Context, tx keelsql.Querier, id string, c CategorySettings, now time.Time, actor string) (bool, error) {
	n, err := tx.Exec(ctx, s.sql("CategoryInsert"), id, c.NameZH, c.NameEN, c.GraceMinutes, FormatBands(c.Bands),
		c.ReminderMinutes, c.AppealMinutes, c.HoldMinutes, string(c.ReleaseMode), now, actor)
	return n > 0, err
}

// updateCategory replaces a category's settings at version; false when it
// is at another version.
func (s *store[TTx]) updateCategory(ctx context.Context, tx keelsql.Querier, id string, version int64, c CategorySettings, now time.Time, actor string) (bool, error) {
	n, err := tx.Exec(ctx, s.sql("CategoryUpdate"), id, version, c.NameZH, c.NameEN, c.GraceMinutes,
		FormatBands(c.Bands), c.ReminderMinutes, c.AppealMinutes, c.HoldMinutes, string(c.ReleaseMode), now, actor)
	return n > 0, err
}
