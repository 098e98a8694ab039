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

// TestLanesPublishWhileRenewalWaits: a rebalance waiting for the database
// (a renewal stuck behind other writers) does not stop the lanes. Before,
// the rebalance held the relay's lock through its statements, and on a busy
// SQLite writer keel dev published nothing for minutes.
func TestLanesPublishWhileRenewalWaits(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		d, _ := testdb.OpenPostgres(t, &testdb.Options{Lines: internalLines})
		testLanesPublishWhileRenewalWaits[pgx.Tx](t, keelsql.Pgx(d.Pool()))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		d, _ := testdb.OpenSQLite(t, &testdb.Options{Lines: internalLines})
		testLanesPublishWhileRenewalWaits[*sql.Tx](t, keelsql.SQLite(d.DB()))
	})
}

// heldRenewal makes the renewal statement wait until release is closed.
type heldRenewal[TTx any] struct {
	keelsql.DB[TTx]
	renewSQL string
	entered  chan struct{}
	release  chan struct{}
}

func (h *heldRenewal[TTx]) Query(ctx context.Context, query string, args ...any) (keelsql.Rows, error) {
	if query == h.renewSQL {
		select {
		case h.entered <- struct{}{}:
		default:
		}
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return h.DB.Query(ctx, query, args...)
}

func testLanesPublishWhileRenewalWaits[TTx any](t *testing.T, db keelsql.DB[TTx]) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	bus, err := NewDatabaseBus(db, &DatabaseBusConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	held := &heldRenewal[TTx]{DB: db, entered: make(chan struct{}, 1), release: make(chan struct{})}
	e, err := New[TTx](held, bus, &Config{Partitions: 1, LeaseTTL: time.Minute, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	held.renewSQL = e.d.sql("LeaseRenewMany")
	if _, err := db.Exec(ctx, e.d.sql("LeaseSeed"), 0); err != nil {
		t.Fatal(err)
	}
	r := &relay[TTx]{e: e, owner: "busy", held: map[int]int64{}}
	if err := r.rebalanceErr(ctx); err != nil { // nothing to renew: takes partition 0
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.rebalanceErr(ctx) }()
	select {
	case <-held.entered:
	case <-ctx.Done():
		t.Fatal("the second rebalance never reached its renewal")
	}
	err = db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		return e.EmitTx(ctx, tx, Event{Topic: "t.x", ID: "e-1", Key: "k", Payload: json.RawMessage(`1`)})
	})
	if err != nil {
		t.Fatal(err)
	}
	// A lane's round, while the renewal still waits. In its own goroutine:
	// a relay that regressed blocks on its lock, which no context ends.
	type result struct {
		n   int
		err error
	}
	published := make(chan result, 1)
	go func() {
		n, err := r.publishOnce(ctx)
		published <- result{n, err}
	}()
	select {
	case got := <-published:
		if got.err != nil || got.n != 1 {
			t.Fatalf("publishing while the renewal waits: %d published, %v", got.n, got.err)
		}
	case <-time.After(10 * time.Second):
		close(held.release) // let the relay finish before the test ends
		<-done
		t.Fatal("the lane published nothing in 10 s while a rebalance waited for the database")
	}
	var unpublished int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM keel_events_outbox WHERE published_at IS NULL").Scan(&unpublished); err != nil {
		t.Fatal(err)
	}
	if unpublished != 0 {
		t.Fatalf("%d events left unpublished", unpublished)
	}
	close(held.release)
	if err := <-done; err != nil {
		t.Fatalf("the rebalance after its wait: %v", err)
	}
	if r.held[0] != 1 {
		t.Fatalf("after the renewal the relay holds %v, want partition 0 at fence 1", r.held)
	}
}
