package inventory

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"

	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/modules/inventory/domain"
	"github.com/keelwork/keel/modules/inventory/store"
)

// The inventory system in the console's navigation, its home numbers and
// its lookups by id (module.Grouper, Homer, Searcher).
var (
	_ module.Grouper  = (*Module[any])(nil)
	_ module.Homer    = (*Module[any])(nil)
	_ module.Searcher = (*Module[any])(nil)
)

// Group implements module.Grouper.
func (m *Module[TTx]) Group() module.Group {
	return module.Group{ZH: "库存", EN: "Inventory", Order: 40}
}

// Home implements module.Homer: the conflict tickets waiting for an
// operator, and this instance's admission watermark (whether new
// reservations are being refused, the recent latency it judges by, and how
// many it refused since start).
func (m *Module[TTx]) Home(ctx context.Context) ([]module.Stat, error) {
	open, err := m.st.Count(ctx, m.db, "HomeOpenConflicts")
	if err != nil {
		return nil, fmt.Errorf("inventory: counting open conflicts: %w", err)
	}
	adm := m.Admission()
	conflicts := module.LevelOK
	if open > 0 {
		conflicts = module.LevelWarn
	}
	admZH, admEN, admLevel := "准入正常·预占延迟", "Admission normal: reservation latency", module.LevelOK
	if adm.Over {
		admZH, admEN, admLevel = "准入已触发·拒绝新预占·预占延迟", "Admission over: new reservations refused; latency", module.LevelBad
		if adm.Forced {
			admZH, admEN = "准入已手动开启·拒绝新预占·预占延迟", "Admission forced on: new reservations refused; latency"
		}
	}
	refused := module.LevelOK
	if adm.Refused > 0 {
		refused = module.LevelWarn
	}
	return []module.Stat{
		{Key: "open_conflicts", ZH: "待处理冲突", EN: "Open conflicts", Value: float64(open), UnitZH: "条", UnitEN: "tickets",
			Level: conflicts, Link: "/inventory/conflicts?state=open"},
		{Key: "admission_latency_ms", ZH: admZH + "（本实例）", EN: admEN + " (this instance)",
			Value: float64(adm.Latency.Milliseconds()), UnitZH: "毫秒", UnitEN: "ms", Level: admLevel, Link: "/inventory"},
		{Key: "admission_refused", ZH: "准入拒绝的预占（本实例启动以来）", EN: "Reservations refused by admission (this instance, since start)",
			Value: float64(adm.Refused), UnitZH: "次", UnitEN: "times", Level: refused, Link: "/inventory"},
	}, nil
}

// Search implements module.Searcher: a SKU (its stock per warehouse), an
// order line or a reservation number (its stock reservation), a conflict
// ticket number.
func (m *Module[TTx]) Search(ctx context.Context, q string) ([]module.Hit, error) {
	var out []module.Hit
	miss := func(err error) (bool, error) {
		if err == nil {
			return false, nil
		}
		if errors.Is(err, keelsql.ErrNoRows) {
			return true, nil
		}
		return true, fmt.Errorf("inventory: looking up %q: %w", q, err)
	}
	rows, err := m.db.Query(ctx, m.st.SQL("SearchSkuWarehouses"), q)
	whs, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (string, error) {
		var wh string
		return wh, r.Scan(&wh)
	})
	if err != nil {
		return nil, fmt.Errorf("inventory: looking up SKU %q: %w", q, err)
	}
	for _, wh := range whs {
		out = append(out, module.Hit{Kind: "sku", KindZH: "SKU 库存", KindEN: "SKU stock", Title: q + " @ " + wh,
			Path: "/inventory?warehouse=" + url.QueryEscape(wh)})
	}
	resHit := func(r store.Reservation) module.Hit {
		w := domain.Words[string(r.State)]
		return module.Hit{Kind: "stock_reservation", KindZH: "库存预占", KindEN: "stock reservation",
			Title:   fmt.Sprintf("#%d · %s · %s × %d · %s", r.ID, r.OrderLine, r.SKU, r.Qty, w[0]),
			TitleEN: fmt.Sprintf("#%d · %s · %s × %d · %s", r.ID, r.OrderLine, r.SKU, r.Qty, w[1]),
			Path:    "/inventory/reservations/" + strconv.FormatInt(r.ID, 10)}
	}
	var seen int64
	byLine, err := m.st.ReservationByLine(ctx, m.db, q)
	if none, err := miss(err); err != nil {
		return nil, err
	} else if !none {
		out, seen = append(out, resHit(byLine)), byLine.ID
	}
	if id, perr := strconv.ParseInt(q, 10, 64); perr == nil && id > 0 {
		r, err := m.st.GetReservation(ctx, m.db, id)
		if none, err := miss(err); err != nil {
			return nil, err
		} else if !none && r.ID != seen {
			out = append(out, resHit(r))
		}
		c, err := m.st.GetConflict(ctx, m.db, id)
		if none, err := miss(err); err != nil {
			return nil, err
		} else if !none {
			st := conflictStates[c.State]
			out = append(out, module.Hit{Kind: "conflict", KindZH: "库存冲突", KindEN: "stock conflict",
				Title:   fmt.Sprintf("#%d · %s @ %s · %s", c.ID, c.SKU, c.Warehouse, st[0]),
				TitleEN: fmt.Sprintf("#%d · %s @ %s · %s", c.ID, c.SKU, c.Warehouse, st[1]),
				Path:    "/inventory/conflicts/" + strconv.FormatInt(c.ID, 10)})
		}
	}
	return out, nil
}
