package keelevents

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelsql"
)

func internalLines(d string) []keelmigrate.Line { return []keelmigrate.Line{Line(d)} }

func TestStaleRelayCannotMark(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		d, _ := testdb.OpenPostgres(t, &testdb.Options{Lines: internalLines})
		testStaleRelayCannotMark[pgx.Tx](t, keelsql.Pgx(d.Pool()))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		d, _ := testdb.OpenSQLite(t, &testdb.Options{Lines: internalLines})
		testStaleRelayCannotMark[*sql.Tx](t, keelsql.SQLite(d.DB()))
	})
}

func testStaleRelayCannotMark[TTx any](t *testing.T, db keelsql.DB[TTx]) {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	bus, err := NewDatabaseBus(db, &DatabaseBusConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	e, err := New(db, bus, &Config{Partitions: 1, LeaseTTL: time.Minute, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, e.d.sql("LeaseSeed"), 0); err != nil {
		t.Fatal(err)
	}
	stale := &relay[TTx]{e: e, owner: "stale", held: map[int]int64{}}
	if err := stale.rebalanceErr(ctx); err != nil {
		t.Fatal(err)
	}
	if stale.held[0] != 1 {
		t.Fatalf("first relay holds %v, want partition 0 at fence 1", stale.held)
	}
	err = db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		return e.EmitTx(ctx, tx, Event{Topic: "t.x", ID: "e-1", Key: "k", Payload: json.RawMessage(`1`)})
	})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(ctx, e.d.sql("OutboxPending"), e.d.ints([]int{0}), 10)
	pending, err := keelsql.CollectRows(rows, err, func(rs keelsql.Rows) (pendingRow, error) {
		m, err := scanMessageSeq(rs)
		return pendingRow{m.seq, m.Message}, err
	})
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending %v, %v", pending, err)
	}
	// The first relay pauses past its lease; another takes the partition.
	if _, err := db.Exec(ctx, "UPDATE keel_events_relay_lease SET expires_at = "+epoch(db)); err != nil {
		t.Fatal(err)
	}
	fresh := &relay[TTx]{e: e, owner: "fresh", held: map[int]int64{}}
	if err := fresh.rebalanceErr(ctx); err != nil {
		t.Fatal(err)
	}
	if fresh.held[0] != 2 {
		t.Fatalf("second relay holds %v, want partition 0 at fence 2", fresh.held)
	}
	// The stale relay wakes up and marks what it published: refused.
	n, err := stale.mark(ctx, pending)
	if err != nil || n != 0 {
		t.Fatalf("stale mark: %d rows, %v", n, err)
	}
	if len(stale.held) != 0 {
		t.Fatalf("the stale relay still believes it holds %v", stale.held)
	}
	if err := stale.rebalanceErr(ctx); err != nil { // its renewal fails too
		t.Fatal(err)
	}
	if _, ok := stale.held[0]; ok {
		t.Fatal("the stale relay took the partition back from a live holder")
	}
	if n, err := fresh.publishOnce(ctx); err != nil || n != 1 {
		t.Fatalf("the new holder published %d, %v", n, err)
	}
}

func epoch[TTx any](db keelsql.DB[TTx]) string {
	if db.Dialect() == "postgres" {
		return "'1970-01-01T00:00:00Z'"
	}
	return "0"
}

func TestBackoffFor(t *testing.T) {
	b := []time.Duration{1, 2, 3}
	for attempt, want := range map[int]time.Duration{0: 1, 1: 1, 2: 2, 3: 3, 4: 3, 100: 3} {
		if got := BackoffFor(b, attempt); got != want {
			t.Errorf("attempt %d: %v, want %v", attempt, got, want)
		}
	}
	if BackoffFor(nil, 1) != DefaultBackoff[0] {
		t.Error("empty backoff does not default")
	}
}

func TestConfigRefusesNegative(t *testing.T) {
	for _, c := range []Config{{Partitions: -1}, {LeaseTTL: -1}, {Partitions: 5000}, {RelayBatch: 20000}} {
		if _, err := c.withDefaults(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}
