package reservation

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
)

// The reservation system in the console's navigation, its home numbers
// and its lookup by id (module.Grouper, Homer, Searcher).
var (
	_ module.Grouper  = (*Module[any])(nil)
	_ module.Homer    = (*Module[any])(nil)
	_ module.Searcher = (*Module[any])(nil)
)

// Group implements module.Grouper.
func (m *Module[TTx]) Group() module.Group {
	return module.Group{ZH: "预约", EN: "Reservations", Order: 10}
}

// Home implements module.Homer: paid reservations past their release time
// and not released yet (the release scan's backlog), categories whose
// release only rehearses (dry run: no-shows keep their slots), and the
// reservations whose release gave up (dead letters, waiting for an
// operator).
func (m *Module[TTx]) Home(ctx context.Context) ([]module.Stat, error) {
	due, err := m.DueCount(ctx)
	if err != nil {
		return nil, err
	}
	cats, err := m.Categories(ctx)
	if err != nil {
		return nil, fmt.Errorf("reservation: reading categories: %w", err)
	}
	dry := 0
	for _, c := range cats {
		if c.ReleaseMode == ModeDryRun {
			dry++
		}
	}
	dead, err := m.DeadLetterCount(ctx)
	if err != nil {
		return nil, err
	}
	lv := func(n int, l module.Level) module.Level {
		if n > 0 {
			return l
		}
		return module.LevelOK
	}
	return []module.Stat{
		{Key: "due_unreleased", ZH: "到期未释放", EN: "Due, not released", Value: float64(due), UnitZH: "条", UnitEN: "reservations",
			Level: lv(due, module.LevelWarn), Link: "/reservation/reservations?state=" + string(StatePaid)},
		{Key: "dry_run_categories", ZH: "演练模式的类别", EN: "Dry-run categories", Value: float64(dry), UnitZH: "个", UnitEN: "categories",
			Level: lv(dry, module.LevelWarn), Link: "/reservation/categories"},
		{Key: "dead_letters", ZH: "释放失败（死信）", EN: "Dead letters", Value: float64(dead), UnitZH: "条", UnitEN: "reservations",
			Level: lv(dead, module.LevelBad), Link: "/reservation/reservations?dead=1"},
	}, nil
}

// Search implements module.Searcher: a reservation number.
func (m *Module[TTx]) Search(ctx context.Context, q string) ([]module.Hit, error) {
	id, err := strconv.ParseInt(q, 10, 64)
	if err != nil || id < 1 {
		return nil, nil
	}
	r, err := m.Reservation(ctx, id)
	if errors.Is(err, keelsql.ErrNoRows) || errors.Is(err, keeltype.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	title := func(lang int) string {
		return fmt.Sprintf("#%d · %s · %s", r.ID, r.UserID, stateWords[r.State][lang])
	}
	return []module.Hit{{Kind: "reservation", KindZH: "预约", KindEN: "reservation", Title: title(0), TitleEN: title(1),
		Path: "/reservation/reservations/" + strconv.FormatInt(r.ID, 10)}}, nil
}
