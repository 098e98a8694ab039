package inventory

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
)

func testLines(dialect string) []keelmigrate.Line {
	lines := append([]keelmigrate.Line{keelevents.Line(dialect)}, keelrecon.Lines(dialect)...)
	return append(lines, Lines(dialect)...)
}

// tenv is one test database with the events backbone on the in-database
// bus and the module built on it.
type tenv[TTx any] struct {
	drv    keeldriver.Driver[TTx]
	db     keelsql.DB[TTx]
	dsn    string
	driver string
	ev     *keelevents.Events[TTx]
	m      *Module[TTx]
	recon  *keelrecon.Recon[TTx]
	client *keel.Client[TTx]
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func pgEnv(t testing.TB) *tenv[pgx.Tx] {
	d, schema := testdb.OpenPostgres(t, &testdb.Options{Lines: testLines})
	return &tenv[pgx.Tx]{drv: d, db: keelsql.Pgx(d.Pool()), dsn: testdb.PostgresSchemaURL(t, schema), driver: "postgres"}
}

func liteEnv(t testing.TB) *tenv[*sql.Tx] {
	d, path := testdb.OpenSQLite(t, &testdb.Options{Lines: testLines})
	return &tenv[*sql.Tx]{drv: d, db: keelsql.SQLite(d.DB()), dsn: path, driver: "sqlite"}
}

// each runs a generic test once per database.
func each(t *testing.T, pg func(t *testing.T, e *tenv[pgx.Tx]), lite func(t *testing.T, e *tenv[*sql.Tx])) {
	t.Run("postgres", func(t *testing.T) { t.Parallel(); pg(t, pgEnv(t)) })
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); lite(t, liteEnv(t)) })
}

// build makes the events backbone and the module (not started).
func (e *tenv[TTx]) build(t testing.TB, settings map[string]string, opts ...Option) *Module[TTx] {
	t.Helper()
	bus, err := keelevents.NewDatabaseBus(e.db, &keelevents.DatabaseBusConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	e.ev, err = keelevents.New(e.db, bus, &keelevents.Config{Partitions: 8, LeaseTTL: 10 * time.Second, StatsInterval: time.Hour, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	e.recon, err = keelrecon.New(e.db, nil)
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
	h := &module.Host[TTx]{DB: e.db, Logger: quiet(), Settings: all, Recon: e.recon}
	e.m, err = New(h, append([]Option{WithEvents(e.ev)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return e.m
}

// start starts the engine client, the events backbone and the module.
func (e *tenv[TTx]) start(t testing.TB) {
	t.Helper()
	cfg := &keel.Config{Logger: quiet()}
	if err := e.ev.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	if err := e.recon.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	var err error
	e.client, err = keel.NewClient(e.drv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.recon.Start(ctx, e.client); err != nil {
		t.Fatal(err)
	}
	if err := e.ev.Start(ctx, e.client); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Start(ctx, e.client); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = e.m.Stop(ctx)
		_ = e.ev.Stop(ctx)
		_ = e.client.Stop(ctx)
	})
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

func count[TTx any](t testing.TB, e *tenv[TTx], query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := e.db.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func stock[TTx any](t testing.TB, e *tenv[TTx], wh, sku string) (available, reserved, version int64) {
	t.Helper()
	st, err := e.m.st.GetStock(context.Background(), e.db, wh, sku)
	if err != nil {
		t.Fatal(err)
	}
	return st.Available, st.Reserved, st.Version
}

// eventually waits for cond (minutes: the race detector on a loaded
// machine is slow, and a condition that holds ends the wait at once).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
