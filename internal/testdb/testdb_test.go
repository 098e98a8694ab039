package testdb_test

import (
	"context"
	"database/sql"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsqlite"
)

func TestPostgresSchemaLifecycle(t *testing.T) {
	ctx := context.Background()
	var schema string
	t.Run("inner", func(t *testing.T) {
		var d *keelpgx.Driver
		d, schema = testdb.OpenPostgres(t, nil)
		if !strings.HasPrefix(schema, testdb.SchemaPrefix) {
			t.Fatalf("schema %q", schema)
		}
		if ok, err := d.Executor().TableExists(ctx, "keel_job"); err != nil || !ok {
			t.Fatalf("not migrated: %v %v", ok, err)
		}

		// A child process would connect with this URL and see the schema.
		conn, err := pgx.Connect(ctx, testdb.PostgresSchemaURL(t, schema))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var cur string
		var migrated bool
		if err := conn.QueryRow(ctx, "SELECT current_schema(), to_regclass('keel_job') IS NOT NULL").Scan(&cur, &migrated); err != nil {
			t.Fatal(err)
		}
		if cur != schema || !migrated {
			t.Fatalf("schema URL: current_schema %q (want %q), keel_job visible %v", cur, schema, migrated)
		}
	})

	conn, err := pgx.Connect(ctx, testdb.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("schema %s not dropped after the test", schema)
	}
}

func TestBare(t *testing.T) {
	ctx := context.Background()
	pg := testdb.NewPostgresBare(t)
	lite := testdb.NewSQLiteBare(t)
	for name, ex := range map[string]keeldriver.Executor{"postgres": pg.Executor(), "sqlite": lite.Executor()} {
		if ok, err := ex.TableExists(ctx, "keel_migration"); err != nil || ok {
			t.Fatalf("%s: bare database has keel_migration: %v %v", name, ok, err)
		}
	}
}

func TestSchemaURLKeywordForm(t *testing.T) {
	t.Setenv(testdb.EnvURL, "host=127.0.0.1 port=5432 user=postgres dbname=postgres sslmode=disable")
	u := testdb.PostgresSchemaURL(t, "keel_t_x")
	if !strings.HasSuffix(u, " search_path=keel_t_x") {
		t.Fatalf("keyword/value URL: %q", u)
	}
}

func TestRun(t *testing.T) {
	var pgRan, liteRan atomic.Bool
	t.Run("both", func(t *testing.T) {
		testdb.Run(t, func(t *testing.T, d keeldriver.Driver[pgx.Tx]) {
			pgRan.Store(true)
			check(t, d, "postgres")
		}, func(t *testing.T, d keeldriver.Driver[*sql.Tx]) {
			liteRan.Store(true)
			check(t, d, "sqlite")
		})
	})
	if !pgRan.Load() || !liteRan.Load() {
		t.Fatalf("ran postgres %v, sqlite %v", pgRan.Load(), liteRan.Load())
	}
}

func TestEachAndHarness(t *testing.T) {
	testdb.Each(t,
		func(t *testing.T, d *keelpgx.Driver) { check(t, d, "postgres") },
		func(t *testing.T, d *keelsqlite.Driver) { check(t, d, "sqlite") },
	)
	check(t, testdb.PostgresHarness(t).Driver, "postgres")
	check(t, testdb.SQLiteHarness(t).Driver, "sqlite")
}

func check[TTx any](t *testing.T, d keeldriver.Driver[TTx], dialect string) {
	t.Helper()
	if d.Dialect() != dialect {
		t.Fatalf("dialect %q, want %q", d.Dialect(), dialect)
	}
	if ok, err := d.Executor().TableExists(context.Background(), "keel_job"); err != nil || !ok {
		t.Fatalf("%s not migrated: %v %v", dialect, ok, err)
	}
}
