package keelevents_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
)

// counter counts the statements sent through q.
type counter struct {
	q keelsql.Querier
	n *atomic.Int64
}

func (c counter) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	c.n.Add(1)
	return c.q.Exec(ctx, q, args...)
}

func (c counter) Query(ctx context.Context, q string, args ...any) (keelsql.Rows, error) {
	c.n.Add(1)
	return c.q.Query(ctx, q, args...)
}

func (c counter) QueryRow(ctx context.Context, q string, args ...any) keelsql.Row {
	c.n.Add(1)
	return c.q.QueryRow(ctx, q, args...)
}

// countingDB counts the statements sent through it: every Exec, Query and
// QueryRow, on the handle or in a transaction, and a begin and a commit
// for each transaction.
type countingDB[TTx any] struct {
	counter
	db keelsql.DB[TTx]
}

func newCountingDB[TTx any](db keelsql.DB[TTx]) *countingDB[TTx] {
	return &countingDB[TTx]{counter: counter{q: db, n: new(atomic.Int64)}, db: db}
}

func (c *countingDB[TTx]) Dialect() string { return c.db.Dialect() }

func (c *countingDB[TTx]) InTx(ctx context.Context, f func(tx keelsql.Tx[TTx]) error) error {
	c.n.Add(2)
	return c.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		return f(countingTx[TTx]{counter: counter{q: tx, n: c.n}, tx: tx})
	})
}

type countingTx[TTx any] struct {
	counter
	tx keelsql.Tx[TTx]
}

func (c countingTx[TTx]) Native() TTx { return c.tx.Native() }

// An idle pipeline, a relay of four lanes and four consumers on the
// in-database bus, sends the database a probe or two per MaxPoll instead
// of a poll per lane and per consumer (about 200 statements a second on
// PostgreSQL before, with the default 100 ms), and what another process
// writes is still found: an event it emits (on SQLite nothing wakes this
// relay, only the probe finds it; on PostgreSQL the notification does),
// and a message its bus publishes (which wakes only its own subscribers
// on either database).
func TestIdlePipelineProbes(t *testing.T) {
	each(t, func(t *testing.T, e *tenv[pgx.Tx]) { testIdlePipelineProbes(t, e) },
		func(t *testing.T, e *tenv[*sql.Tx]) { testIdlePipelineProbes(t, e) })
}

func testIdlePipelineProbes[TTx any](t *testing.T, env *tenv[TTx]) {
	ctx := context.Background()
	db := newCountingDB(env.db)
	bus, err := keelevents.NewDatabaseBus[TTx](db, &keelevents.DatabaseBusConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	cfg := fastConfig()
	cfg.RelayLanes = 4
	cfg.LeaseTTL = time.Minute // no rebalance inside the windows counted
	ev, err := keelevents.New[TTx](db, bus, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got [4]atomic.Int64
	for i := range got {
		err := ev.Consume(keelevents.Consumer[TTx]{Name: fmt.Sprintf("idle-%d", i), Topics: []string{"idle.>"},
			Handle: func(context.Context, keelsql.Tx[TTx], *keelevents.Delivery) error {
				got[i].Add(1)
				return nil
			}})
		if err != nil {
			t.Fatal(err)
		}
	}
	start(t, env, ev)
	all := func(n int64) func() bool {
		return func() bool {
			for i := range got {
				if got[i].Load() < n {
					return false
				}
			}
			return true
		}
	}

	// Another process: its own Events, without a relay, on its own handle.
	otherBus, err := keelevents.NewDatabaseBus(env.db, &keelevents.DatabaseBusConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = otherBus.Close() })
	ocfg := fastConfig()
	ocfg.DisableRelay = true
	other, err := keelevents.New(env.db, otherBus, ocfg)
	if err != nil {
		t.Fatal(err)
	}
	idle := func(what string) {
		t.Helper()
		// Per second, once the loops have backed off to MaxPoll: the
		// relay's probe and the bus's, ten each, and on a loaded machine
		// fewer. Polling per lane and per consumer was 80 (SQLite) to 200
		// (PostgreSQL).
		const limit = 40
		var last int64
		for range 10 {
			before := db.n.Load()
			time.Sleep(time.Second) // the window counted, not a wait for a condition
			if last = db.n.Load() - before; last <= limit {
				return
			}
		}
		t.Fatalf("%s: idle pipeline still sends %d statements a second after 10 s, want at most %d", what, last, limit)
	}

	idle("before any event")
	emit(t, env, other, keelevents.Event{Topic: "idle.emitted", ID: "e-1", Key: "k", Payload: json.RawMessage(`{}`)})
	eventually(t, "the other process's event reaching every consumer", all(1))
	idle("after the emitted event")

	payload := []byte(`{}`)
	msg := keelevents.Message{Topic: "idle.published", ID: "p-1", Key: "k", Type: "idle.published",
		Partition: keelevents.PartitionOf("k", cfg.Partitions), Payload: payload,
		Digest: keelevents.Digest(payload), EmittedAt: time.Now().UTC()}
	if n, err := otherBus.Publish(ctx, []keelevents.Message{msg}); err != nil || n != 1 {
		t.Fatalf("publishing on the other bus: %d, %v", n, err)
	}
	eventually(t, "the other bus's message reaching every consumer", all(2))
	idle("after the published message")
}

// EmitTx wakes its process's relay before its transaction commits; the
// woken lanes must keep looking until the commit shows rather than park.
// MaxPoll is an hour here, so an event that waited for the relay's probe
// (or for a lane's next poll at MaxPoll) would not arrive within the
// test. The transaction stays open a while after EmitTx so that the
// lanes' first looks find nothing. Started without an engine client, the
// relay has no listener on PostgreSQL either: EmitTx's wake is all there
// is. (On SQLite a lane's look waits for the writer the transaction
// holds, so it sees the commit anyway.)
func TestEmitBeforeCommitIsPublishedWithoutPolling(t *testing.T) {
	each(t, func(t *testing.T, e *tenv[pgx.Tx]) { testEmitBeforeCommit(t, e) },
		func(t *testing.T, e *tenv[*sql.Tx]) { testEmitBeforeCommit(t, e) })
}

func testEmitBeforeCommit[TTx any](t *testing.T, env *tenv[TTx]) {
	ctx := context.Background()
	cfg := fastConfig()
	cfg.MaxPoll = time.Hour
	cfg.LeaseTTL = time.Hour // no rebalance (which looks at every partition) within the test
	ev := newEvents(t, env, cfg)
	var got atomic.Int64
	err := ev.Consume(keelevents.Consumer[TTx]{Name: "slow-commit", Topics: []string{"slow.>"},
		Handle: func(context.Context, keelsql.Tx[TTx], *keelevents.Delivery) error {
			got.Add(1)
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	startWith(t, ev, nil)
	for i := range 3 {
		err := env.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
			if err := ev.EmitTx(ctx, tx, keelevents.Event{Topic: "slow.x", ID: fmt.Sprintf("s-%d", i), Key: "k",
				Payload: json.RawMessage(`{}`)}); err != nil {
				return err
			}
			time.Sleep(150 * time.Millisecond) // the commit comes after the wake, not a wait for a condition
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, fmt.Sprintf("event %d delivered", i), func() bool { return got.Load() == int64(i+1) })
	}
}
