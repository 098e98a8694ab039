package keelsql_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsqlite"
)

type noteArgs struct{}

func (noteArgs) Kind() string { return "keelsql.note" }

// TestConformance runs the same module-shaped code on both dialects: times
// round-trip through both forms, no rows is one error, a transaction rolls
// back the module's write and the engine's insert together.
func TestConformance(t *testing.T) {
	testdb.Each(t,
		func(t *testing.T, d *keelpgx.Driver) {
			run(t, keelsql.Pgx(d.Pool()), d, "CREATE TABLE note (id bigint PRIMARY KEY, at timestamptz NOT NULL, done_at timestamptz)",
				"INSERT INTO note VALUES ($1, $2, $3)", "SELECT at, done_at FROM note WHERE id = $1")
		},
		func(t *testing.T, d *keelsqlite.Driver) {
			run(t, keelsql.SQLite(d.DB()), d, "CREATE TABLE note (id INTEGER PRIMARY KEY, at INTEGER NOT NULL, done_at INTEGER)",
				"INSERT INTO note VALUES (?1, ?2, ?3)", "SELECT at, done_at FROM note WHERE id = ?1")
		})
}

func run[TTx any](t *testing.T, db keelsql.DB[TTx], d keeldriver.Driver[TTx], create, insert, get string) {
	ctx := context.Background()
	if _, err := db.Exec(ctx, create); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)
	if n, err := db.Exec(ctx, insert, 1, at, (*time.Time)(nil)); err != nil || n != 1 {
		t.Fatalf("insert: %d, %v", n, err)
	}
	var got time.Time
	var done *time.Time
	if err := db.QueryRow(ctx, get, 1).Scan(&got, &done); err != nil {
		t.Fatal(err)
	}
	if !got.Equal(at) || done != nil {
		t.Fatalf("read %v, %v; want %v, nil", got, done, at)
	}
	if err := db.QueryRow(ctx, get, 2).Scan(&got, &done); !errors.Is(err, keelsql.ErrNoRows) {
		t.Fatalf("missing row: %v, want ErrNoRows", err)
	}
	client, err := keel.NewClient(d, &keel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err = db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		if _, err := tx.Exec(ctx, insert, 3, at, &at); err != nil {
			return err
		}
		if _, err := client.InsertTx(ctx, tx.Native(), noteArgs{}, nil); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx: %v", err)
	}
	jobs, err := client.JobList(ctx, &keel.JobListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(ctx, get, 3).Scan(&got, &done); !errors.Is(err, keelsql.ErrNoRows) || len(jobs) != 0 {
		t.Fatalf("after rollback: row err %v, %d jobs; want neither", err, len(jobs))
	}
	if err := db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		if _, err := tx.Exec(ctx, insert, 3, at, &at); err != nil {
			return err
		}
		_, err := client.InsertTx(ctx, tx.Native(), noteArgs{}, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(ctx, "SELECT done_at FROM note ORDER BY id")
	dones, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (*time.Time, error) {
		var v *time.Time
		return v, r.Scan(&v)
	})
	if err != nil || len(dones) != 2 || dones[0] != nil || dones[1] == nil || !dones[1].Equal(at) {
		t.Fatalf("rows: %v, %v", dones, err)
	}
	if jobs, _ = client.JobList(ctx, &keel.JobListParams{Limit: 10}); len(jobs) != 1 {
		t.Fatalf("committed tx left %d jobs, want 1", len(jobs))
	}
}
