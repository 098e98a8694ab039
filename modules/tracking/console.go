package tracking

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
)

// The tracking system in the console's navigation, its home numbers and
// its lookup by waybill (module.Grouper, Homer, Searcher).
var (
	_ module.Grouper  = (*Module[any])(nil)
	_ module.Homer    = (*Module[any])(nil)
	_ module.Searcher = (*Module[any])(nil)
)

// Group implements module.Grouper.
func (m *Module[TTx]) Group() module.Group {
	return module.Group{ZH: "物流跟踪", EN: "Tracking", Order: 60}
}

// Home implements module.Homer: the sequence gaps still open (events a
// carrier skipped, being backfilled) and the carrier shares whose breaker
// is not closed (queries to that carrier held back).
func (m *Module[TTx]) Home(ctx context.Context) ([]module.Stat, error) {
	hs, err := m.Healths(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracking: reading carrier health: %w", err)
	}
	var gaps, breakers int64
	for _, h := range hs {
		gaps += h.OpenGaps
		for _, sh := range []ShareHealth{h.Realtime, h.Backfill} {
			if sh.Breaker != "" && sh.Breaker != keeltype.BreakerClosed {
				breakers++
			}
		}
	}
	gl, bl := module.LevelOK, module.LevelOK
	if gaps > 0 {
		gl = module.LevelWarn
	}
	if breakers > 0 {
		bl = module.LevelBad
	}
	return []module.Stat{
		{Key: "open_gaps", ZH: "未补齐的轨迹缺口", EN: "Open gaps", Value: float64(gaps), UnitZH: "个", UnitEN: "gaps",
			Level: gl, Link: "/tracking/carriers"},
		{Key: "open_breakers", ZH: "熔断中的承运商通道", EN: "Open breakers", Value: float64(breakers), UnitZH: "个", UnitEN: "shares",
			Level: bl, Link: "/tracking/carriers"},
	}, nil
}

// Search implements module.Searcher: a waybill number, exact or an
// unambiguous prefix (a handful at most), on any carrier.
func (m *Module[TTx]) Search(ctx context.Context, q string) ([]module.Hit, error) {
	// The store's lookup is a LIKE prefix: a wildcard the operator typed
	// would match other waybills, so such a query names none.
	if len(q) > 64 || strings.ContainsAny(q, "%_\\") {
		return nil, nil
	}
	ws, err := m.store.Search(ctx, q, "", 6)
	if err != nil {
		return nil, fmt.Errorf("tracking: looking up waybill %q: %w", q, err)
	}
	var exact, prefix []module.Hit
	for _, w := range ws {
		h := module.Hit{Kind: "waybill", KindZH: "运单", KindEN: "waybill",
			Title:   w.Carrier + " · " + w.Waybill + " · " + w.State.Milestone.Word("zh"),
			TitleEN: w.Carrier + " · " + w.Waybill + " · " + w.State.Milestone.Word("en"),
			Path:    "/tracking/waybills/" + url.PathEscape(w.Carrier) + "/" + url.PathEscape(w.Waybill)}
		if w.Waybill == q {
			exact = append(exact, h)
		} else {
			prefix = append(prefix, h)
		}
	}
	if len(exact) > 0 || len(prefix) > 5 {
		return exact, nil
	}
	return prefix, nil
}
