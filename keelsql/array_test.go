package keelsql_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsqlite"
)

// TestArray passes the same Go values on both dialects; only the SQL
// reading them differs (a native array on PostgreSQL, json_each on SQLite).
func TestArray(t *testing.T) {
	testdb.Each(t,
		func(t *testing.T, d *keelpgx.Driver) {
			testArray(t, keelsql.Pgx(d.Pool()),
				"SELECT count(*) FROM unnest($1::bigint[]) AS x WHERE x > 1",
				"SELECT coalesce(string_agg(x, ',' ORDER BY x), '') FROM unnest($1::text[]) AS x",
				"SELECT min(x) FROM unnest($1::timestamptz[]) AS x")
		},
		func(t *testing.T, d *keelsqlite.Driver) {
			testArray(t, keelsql.SQLite(d.DB()),
				"SELECT count(*) FROM json_each(?1) WHERE value > 1",
				"SELECT coalesce(group_concat(value, ','), '') FROM (SELECT value FROM json_each(?1) ORDER BY value)",
				"SELECT min(value) FROM json_each(?1)")
		})
}

func testArray[TTx any](t *testing.T, db keelsql.DB[TTx], ints, strs, times string) {
	ctx := context.Background()
	var n int64
	if err := db.QueryRow(ctx, ints, keelsql.ArrayOf([]int64{1, 2, 3})).Scan(&n); err != nil || n != 2 {
		t.Fatalf("ints: %d, %v", n, err)
	}
	if err := db.QueryRow(ctx, ints, keelsql.ArrayOf[int64](nil)).Scan(&n); err != nil || n != 0 {
		t.Fatalf("nil ints: %d, %v", n, err)
	}
	var s string
	if err := db.QueryRow(ctx, strs, keelsql.ArrayOf([]string{"b", "a", "c'd"})).Scan(&s); err != nil || s != "a,b,c'd" {
		t.Fatalf("strings: %q, %v", s, err)
	}
	early := time.Date(2026, 12, 1, 8, 0, 0, 123456000, time.FixedZone("CST", 8*3600))
	arr := keelsql.ArrayOf([]time.Time{early.Add(time.Hour), early})
	err := db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		var got time.Time
		if err := tx.QueryRow(ctx, times, arr).Scan(&got); err != nil {
			return err
		}
		if !got.Equal(early) {
			t.Errorf("earliest time %v, want %v", got, early)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("times: %v", err)
	}
}

// A list goes to a statement the same way on both databases; each
// dialect's .sql file reads it in its own form.
func ExampleArrayOf() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "keelsql-example")
	defer os.RemoveAll(dir)
	d, err := keelsqlite.Open(filepath.Join(dir, "x.db"), nil)
	if err != nil {
		panic(err)
	}
	defer d.Close()
	db := keelsql.SQLite(d.DB())
	// PostgreSQL: SELECT count(*) FROM unnest($1::bigint[]) AS id WHERE id > 1
	var n int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM json_each(?1) WHERE value > 1", keelsql.ArrayOf([]int64{1, 2, 3})).Scan(&n); err != nil {
		panic(err)
	}
	fmt.Println(n)
	// Output: 2
}
