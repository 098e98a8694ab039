package inventory

import (
	"context"
	"database/sql"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
)

func TestInventoryConsoleHomeAndSearch(t *testing.T) {
	each(t, testConsoleHomeAndSearch[pgx.Tx], testConsoleHomeAndSearch[*sql.Tx])
}

// A late release of a confirmed reservation opens a conflict: the home
// counts it, and admission is normal with nothing refused. The search
// finds the SKU's stock, the reservation by its order line and by its
// number, and the conflict ticket by its number.
func testConsoleHomeAndSearch[TTx any](t *testing.T, e *tenv[TTx]) {
	ctx := context.Background()
	m := e.build(t, nil)
	seed(t, m, "WH1", "SKU-C1", 10)
	home := func() map[string]module.Stat { return moduletest.HomeStats(t, m) }
	if s := home(); s["open_conflicts"].Value != 0 || s["admission_refused"].Value != 0 || s["admission_latency_ms"].Level != module.LevelOK {
		t.Fatalf("quiet: %+v", s)
	}
	res, err := m.Reserve(ctx, ReserveRequest{OrderLine: "OC1-1", Warehouse: "WH1", SKU: "SKU-C1", Qty: 2})
	if err != nil || res.Outcome != OutcomeApplied {
		t.Fatalf("reserve: %+v %v", res, err)
	}
	if _, err := m.Confirm(ctx, res.ReservationID, ConfirmRequest{Receipt: "R1", StockVersion: res.StockVersion}); err != nil {
		t.Fatal(err)
	}
	rel, err := m.Release(ctx, res.ReservationID, ReleaseRequest{Reason: "late cancel"})
	if err != nil || rel.ConflictID == 0 {
		t.Fatalf("late release: %+v %v", rel, err)
	}
	if s := home(); s["open_conflicts"].Value != 1 || s["open_conflicts"].Level != module.LevelWarn {
		t.Fatalf("after the conflict: %+v", s["open_conflicts"])
	}
	paths := func(q string) map[string]bool { return moduletest.SearchPaths(t, m, q) }
	rid, cid := strconv.FormatInt(res.ReservationID, 10), strconv.FormatInt(rel.ConflictID, 10)
	if p := paths("SKU-C1"); !p["/inventory?warehouse=WH1"] || len(p) != 1 {
		t.Errorf("search the SKU: %v", p)
	}
	if p := paths("OC1-1"); !p["/inventory/reservations/"+rid] || len(p) != 1 {
		t.Errorf("search the order line: %v", p)
	}
	if p := paths(cid); !p["/inventory/conflicts/"+cid] {
		t.Errorf("search conflict %s: %v", cid, p)
	}
	if p := paths(rid); !p["/inventory/reservations/"+rid] {
		t.Errorf("search reservation %s: %v", rid, p)
	}
	if p := paths("no-such-thing"); len(p) != 0 {
		t.Errorf("search nothing: %v", p)
	}
}
