package reservation

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keelmigrate"
)

func TestMigrationsDownAndUp(t *testing.T) {
	runBoth(t, testMigrations[pgx.Tx], testMigrations[*sql.Tx])
}

// The line reverts completely and applies again; the module then works.
func testMigrations[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	mig, err := keelmigrate.New(e.driver, &keelmigrate.Config{Lines: Lines(e.driver.Dialect())})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mig.Down(ctx, &keelmigrate.DownOpts{Line: LineName, All: true}); err != nil {
		t.Fatalf("down: %v", err)
	}
	if _, err := mig.Up(ctx, nil); err != nil {
		t.Fatalf("up again: %v", err)
	}
	m := e.module(t)
	f := setup(t, m, 1)
	paid(t, m, f.slot.ID, "u1")
	if _, err := Line("mysql"); err == nil {
		t.Fatal("an unknown dialect has a line")
	}
}
