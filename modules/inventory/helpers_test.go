package inventory

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
)

var testLines = moduletest.Lines(moduletest.EventsLines, keelrecon.Lines, Lines)

// tenv is one test database (the kit's Env) with the events backbone on
// the in-database bus and the module built on it.
type tenv[TTx any] struct {
	*moduletest.Env[TTx]
	ev     *keelevents.Events[TTx]
	bus    keelevents.Bus // if set, build's backbone runs on it, not on the in-database bus
	m      *Module[TTx]
	recon  *keelrecon.Recon[TTx]
	client *keel.Client[TTx]
}

func newTenv[TTx any](e *moduletest.Env[TTx]) *tenv[TTx] { return &tenv[TTx]{Env: e} }

// each runs a generic test once per database, the two side by side; t is
// not made parallel here (several callers are parallel subtests already).
func each(t *testing.T, pg func(t *testing.T, e *tenv[pgx.Tx]), lite func(t *testing.T, e *tenv[*sql.Tx])) {
	moduletest.Both(t, testLines, moduletest.With(newTenv[pgx.Tx], pg), moduletest.With(newTenv[*sql.Tx], lite))
}

// build makes the events backbone and the module (not started).
func (e *tenv[TTx]) build(t testing.TB, settings map[string]string, opts ...Option) *Module[TTx] {
	t.Helper()
	cfg := &keelevents.Config{Partitions: 8, LeaseTTL: 10 * time.Second, StatsInterval: time.Hour}
	var err error
	if e.bus != nil {
		cfg.Logger = moduletest.Quiet()
		if e.ev, err = keelevents.New(e.DB, e.bus, cfg); err != nil {
			t.Fatal(err)
		}
	} else {
		e.ev = e.Events(t, cfg)
	}
	e.recon, err = keelrecon.New(e.DB, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The watermark's defaults (500ms, 200ms) are passed on a loaded test
	// machine, where reservations would get 429 in tests about something
	// else; the admission tests set their own budgets.
	all := map[string]string{"inventory.latency_budget": "1m", "inventory.pool_wait_budget": "1m"}
	for k, v := range settings {
		all[k] = v
	}
	h := &module.Host[TTx]{DB: e.DB, Logger: moduletest.Quiet(), Settings: all, Recon: e.recon}
	e.m, err = New(h, append([]Option{WithEvents(e.ev)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return e.m
}

// start starts the engine client, the events backbone and the module.
func (e *tenv[TTx]) start(t testing.TB) {
	t.Helper()
	cfg := &keel.Config{Logger: moduletest.Quiet()}
	if err := e.ev.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	if err := e.recon.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	e.client = e.Run(t, cfg, e.recon, e.ev, e.m)
}

// seed creates warehouse wh, SKU sku and receives qty.
func seed[TTx any](t testing.TB, m *Module[TTx], wh, sku string, qty int64) {
	t.Helper()
	ctx := context.Background()
	if err := m.PutWarehouse(ctx, Warehouse{ID: wh, NameZh: "仓库" + wh, NameEn: "Warehouse " + wh}); err != nil {
		t.Fatal(err)
	}
	if err := m.PutSKU(ctx, SKU{ID: sku, NameZh: "商品" + sku, NameEn: "Item " + sku, UnitValueMinor: 1000, Currency: "CNY"}); err != nil {
		t.Fatal(err)
	}
	if qty > 0 {
		if _, err := m.Receive(ctx, "init-"+wh+"-"+sku, wh, sku, qty); err != nil {
			t.Fatal(err)
		}
	}
}

// lateConflict reserves 4 of SKU1 in WH1 for order line line, releases
// the reservation and then confirms it shipped (SHIP-1): a confirmation
// that arrived after the release, which the module keeps as a conflict.
func lateConflict[TTx any](t testing.TB, m *Module[TTx], line string) (reserved, late Result) {
	t.Helper()
	ctx := context.Background()
	reserved, err := m.Reserve(ctx, ReserveRequest{OrderLine: line, Warehouse: "WH1", SKU: "SKU1", Qty: 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Release(ctx, reserved.ReservationID, ReleaseRequest{Reason: "cancel"}); err != nil {
		t.Fatal(err)
	}
	late, err = m.Confirm(ctx, reserved.ReservationID, ConfirmRequest{Receipt: "SHIP-1", StockVersion: 2})
	if err != nil || late.ConflictID == 0 {
		t.Fatalf("late confirm: %+v %v", late, err)
	}
	return reserved, late
}

func stock[TTx any](t testing.TB, e *tenv[TTx], wh, sku string) (available, reserved, version int64) {
	t.Helper()
	st, err := e.m.st.GetStock(context.Background(), e.DB, wh, sku)
	if err != nil {
		t.Fatal(err)
	}
	return st.Available, st.Reserved, st.Version
}

// eventually waits for cond (minutes: the race detector on a loaded
// machine is slow, and a condition that holds ends the wait at once).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	moduletest.WaitFor(t, 3*time.Minute, what, cond)
}
