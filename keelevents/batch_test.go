package keelevents_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
)

// TestInboxBatch runs two batching consumers (HandleBatch, and Handle with
// Batch) over one backlog that holds a poison event: deliveries share
// transactions, every good event has exactly one effect, the poison one is
// isolated and goes to manual on its own budget, and a later republish of
// the same events inside one batch is absorbed (same payload) or
// quarantined (another payload), never applied again.
func TestInboxBatch(t *testing.T) { each(t, testInboxBatch[pgx.Tx], testInboxBatch[*sql.Tx]) }

func testInboxBatch[TTx any](t *testing.T, env *tenv[TTx]) {
	effectTable(t, env)
	// Retention 1ns: the bus forgets acknowledged messages at each prune,
	// so a republish reaches the inbox (as past a duplicate window).
	bus, err := keelevents.NewDatabaseBus(env.db, &keelevents.DatabaseBusConfig{Retention: time.Nanosecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	ev, err := keelevents.New(env.db, bus, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	gate := &batchGate[TTx]{ev: ev, consumer: "ledger"}
	if err := ev.Consume(keelevents.Consumer[TTx]{Name: "ledger", Topics: []string{"pay.done"}, MaxAttempts: 2,
		Backoff: []time.Duration{10 * time.Millisecond}, Batch: 50,
		HandleBatch: func(ctx context.Context, tx keelsql.Tx[TTx], ds []*keelevents.Delivery) error {
			gate.enter(len(ds))
			for _, d := range ds {
				if d.ID == "p-poison" {
					return errors.New("no such account")
				}
				if _, err := tx.Exec(ctx, insertEffect(env.driver), "ledger", d.ID, d.Key); err != nil {
					return err
				}
			}
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	if err := ev.Consume(keelevents.Consumer[TTx]{Name: "audit", Topics: []string{"pay.done"}, Batch: 20,
		Handle: func(ctx context.Context, tx keelsql.Tx[TTx], d *keelevents.Delivery) error {
			_, err := tx.Exec(ctx, insertEffect(env.driver), "audit", d.ID, d.Key)
			return err
		}}); err != nil {
		t.Fatal(err)
	}
	if err := ev.Consume(keelevents.Consumer[TTx]{Name: "bad", Topics: []string{"pay.done"}, Batch: keelevents.MaxBatch + 1,
		Handle: func(context.Context, keelsql.Tx[TTx], *keelevents.Delivery) error { return nil }}); !errors.Is(err, keelevents.ErrInvalid) {
		t.Fatalf("Batch over MaxBatch: %v", err)
	}
	start(t, env, ev)
	const n = 60
	ctx := context.Background()
	payload := func(i int) string { return fmt.Sprintf(`{"amount":%d}`, i) }
	err = env.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		for i := range n {
			id := fmt.Sprintf("p-%d", i)
			if i == n/2 {
				id = "p-poison"
			}
			e := keelevents.Event{Topic: "pay.done", ID: id, Key: fmt.Sprintf("o-%d", i%7), Payload: json.RawMessage(payload(i))}
			if err := ev.EmitTx(ctx, tx, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	effects := func(c string) int {
		return count(t, env, "SELECT count(*) FROM t_effect WHERE consumer = '"+c+"'")
	}
	eventually(t, "every event applied", func() bool { return effects("ledger") == n-1 && effects("audit") == n })
	eventually(t, "the poison event in manual", func() bool {
		m, err := ev.ListManual(ctx, keelevents.ListParams{Consumer: "ledger", State: "manual"})
		return err == nil && len(m) == 1
	})
	m, _ := ev.ListManual(ctx, keelevents.ListParams{Consumer: "ledger"})
	if m[0].Message.ID != "p-poison" || m[0].Attempts != 2 {
		t.Fatalf("manual: %+v", m[0])
	}
	gate.check(t)

	// Republish ten of them in one bus publish, so they arrive together:
	// nine with their payload (absorbed), one with another (quarantined).
	// The bus prunes only acknowledged messages, and a message it still
	// holds absorbs its republish before any inbox sees it: wait for the
	// last acknowledgements (they follow the commits) before pruning.
	eventually(t, "every delivery acknowledged", func() bool {
		return count(t, env, "SELECT count(*) FROM keel_events_bus_delivery") == 0
	})
	if err := ev.Archive(ctx); err != nil { // prunes the bus
		t.Fatal(err)
	}
	// Counted from here: the first phase may already have absorbed
	// redeliveries (a batch retried one by one, a lease lost on a loaded
	// machine), which are duplicates too.
	before := map[string]keelevents.ConsumerStats{}
	cs0, err := ev.ConsumerStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs0 {
		before[c.Name] = c
	}
	var again []keelevents.Message
	for i := range 10 {
		p := payload(i)
		if i == 3 {
			p = `{"amount":-1}`
		}
		again = append(again, keelevents.Message{Topic: "pay.done", ID: fmt.Sprintf("p-%d", i), Key: fmt.Sprintf("o-%d", i%7),
			Type: "pay.done", Payload: []byte(p), Digest: keelevents.Digest([]byte(p)), EmittedAt: time.Now().UTC()})
	}
	if _, err := bus.Publish(ctx, again); err != nil {
		t.Fatal(err)
	}
	var cs []keelevents.ConsumerStats
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("consumer stats at the end: %+v", cs)
		}
	})
	eventually(t, "the republish absorbed", func() bool {
		cs, err = ev.ConsumerStats(ctx)
		if err != nil {
			return false
		}
		done := 0
		for _, c := range cs {
			b := before[c.Name]
			if c.Name != "bad" && c.Duplicates-b.Duplicates == 9 && c.Quarantined-b.Quarantined == 1 {
				done++
			}
		}
		return done == 2
	})
	if effects("ledger") != n-1 || effects("audit") != n {
		t.Fatalf("a republished event was applied again: ledger %d, audit %d", effects("ledger"), effects("audit"))
	}
}

// TestInboxBatchPartial: a batch handler that sends each event to a
// counterpart and reports which sends failed (BatchErrors). The
// counterpart is what is counted: every good event reaches it once, never
// again because a neighbour in its batch failed; a flaky event is
// redelivered alone until it goes through (its effect once); a poison
// event reaches it once per attempt and then goes to manual with no
// effect.
func TestInboxBatchPartial(t *testing.T) {
	each(t, testInboxBatchPartial[pgx.Tx], testInboxBatchPartial[*sql.Tx])
}

func testInboxBatchPartial[TTx any](t *testing.T, env *tenv[TTx]) {
	effectTable(t, env)
	ev := newEvents(t, env, nil)
	var mu sync.Mutex
	sent := map[string]int{} // what the counterpart received, by event id
	gate := &batchGate[TTx]{ev: ev, consumer: "sender"}
	if err := ev.Consume(keelevents.Consumer[TTx]{Name: "sender", Topics: []string{"notice.due"}, MaxAttempts: 3,
		Backoff: []time.Duration{10 * time.Millisecond}, Batch: 50,
		HandleBatch: func(ctx context.Context, tx keelsql.Tx[TTx], ds []*keelevents.Delivery) error {
			gate.enter(len(ds))
			errs := make(keelevents.BatchErrors, len(ds))
			for i, d := range ds {
				mu.Lock()
				sent[d.ID]++
				mu.Unlock()
				// The counterpart refuses the poison event always and
				// the flaky one on its first two attempts.
				if d.ID == "n-poison" || (d.ID == "n-flaky" && d.Attempt < 3) {
					errs[i] = fmt.Errorf("counterpart busy (attempt %d)", d.Attempt)
					continue
				}
				if _, err := tx.Exec(ctx, insertEffect(env.driver), "sender", d.ID, d.Key); err != nil {
					return err
				}
			}
			return errs
		}}); err != nil {
		t.Fatal(err)
	}
	start(t, env, ev)
	const n = 80
	ctx := context.Background()
	err := env.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		for i := range n {
			id := fmt.Sprintf("n-%d", i)
			switch i {
			case n / 3:
				id = "n-poison"
			case 2 * n / 3:
				id = "n-flaky"
			}
			e := keelevents.Event{Topic: "notice.due", ID: id, Key: fmt.Sprintf("u-%d", i), Payload: json.RawMessage(`{}`)}
			if err := ev.EmitTx(ctx, tx, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	effects := func() int { return count(t, env, "SELECT count(*) FROM t_effect WHERE consumer = 'sender'") }
	eventually(t, "every event but the poison one applied", func() bool { return effects() == n-1 })
	eventually(t, "the poison event in manual", func() bool {
		m, err := ev.ListManual(ctx, keelevents.ListParams{Consumer: "sender", State: "manual"})
		return err == nil && len(m) == 1
	})
	m, _ := ev.ListManual(ctx, keelevents.ListParams{Consumer: "sender"})
	if m[0].Message.ID != "n-poison" || m[0].Attempts != 3 {
		t.Fatalf("manual: %+v", m[0])
	}
	if got := count(t, env, "SELECT count(*) FROM t_effect WHERE event_id = 'n-poison'"); got != 0 {
		t.Fatalf("the poison event has %d effects", got)
	}
	gate.check(t)
	mu.Lock()
	defer mu.Unlock()
	var again []string
	for id, k := range sent {
		want := 1
		if id == "n-poison" || id == "n-flaky" {
			want = 3
		}
		if k != want {
			again = append(again, fmt.Sprintf("%s×%d", id, k))
		}
	}
	if len(again) > 0 || len(sent) != n {
		t.Fatalf("the counterpart received %d distinct events, and these a wrong number of times (want 1, or 3 for the failing two): %v",
			len(sent), again)
	}
}

// batchGate holds a batching consumer's first transaction until other
// deliveries queue behind it, so that the next one is a real batch, and
// records every batch's size.
type batchGate[TTx any] struct {
	ev       *keelevents.Events[TTx]
	consumer string
	mu       sync.Mutex
	sizes    []int
}

// enter is called by the handler with its batch's size.
func (g *batchGate[TTx]) enter(n int) {
	g.mu.Lock()
	first := g.sizes == nil
	g.sizes = append(g.sizes, n)
	g.mu.Unlock()
	if !first {
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for keelevents.Queued(g.ev, g.consumer) < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

// check fails t unless some batch held more than one delivery.
func (g *batchGate[TTx]) check(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if slices.Max(append([]int{0}, g.sizes...)) < 2 {
		t.Fatalf("no batch held more than one delivery: %v", g.sizes)
	}
}

// TestBatchWithOneNewEventFailsOnce: a batch whose only new event fails
// (the others are redeliveries, absorbed) gives that event its handler's
// error and does not call the handler for it again alone, so a counterpart
// receives each attempt once; the redeliveries stay absorbed. Both ways a
// handler reports a failure are covered: a plain error and BatchErrors.
func TestBatchWithOneNewEventFailsOnce(t *testing.T) {
	each(t, testBatchWithOneNewEventFailsOnce[pgx.Tx], testBatchWithOneNewEventFailsOnce[*sql.Tx])
}

func testBatchWithOneNewEventFailsOnce[TTx any](t *testing.T, env *tenv[TTx]) {
	effectTable(t, env)
	ev := newEvents(t, env, nil)
	var mu sync.Mutex
	sent := map[string]int{} // what the counterpart received, by consumer, event and attempt
	send := func(ctx context.Context, tx keelsql.Tx[TTx], consumer string, d *keelevents.Delivery) error {
		mu.Lock()
		sent[fmt.Sprintf("%s %s #%d", consumer, d.ID, d.Attempt)]++
		mu.Unlock()
		if d.ID == "poison" {
			return errors.New("counterpart refused")
		}
		_, err := tx.Exec(ctx, insertEffect(env.driver), consumer, d.ID, d.Key)
		return err
	}
	for _, name := range []string{"plain", "partial"} {
		if err := ev.Consume(keelevents.Consumer[TTx]{Name: name, Topics: []string{"notice.due"}, MaxAttempts: 2, Batch: 10,
			HandleBatch: func(ctx context.Context, tx keelsql.Tx[TTx], ds []*keelevents.Delivery) error {
				errs := make(keelevents.BatchErrors, len(ds))
				for i, d := range ds {
					if err := send(ctx, tx, name, d); err != nil {
						if name == "plain" {
							return err
						}
						errs[i] = err
					}
				}
				return errs
			}}); err != nil {
			t.Fatal(err)
		}
	}
	delivery := func(id string, attempt int) *keelevents.Delivery {
		p := []byte(`{}`)
		return &keelevents.Delivery{Attempt: attempt, Message: keelevents.Message{Topic: "notice.due", ID: id, Key: "k-" + id,
			Type: "notice.due", Payload: p, Digest: keelevents.Digest(p), EmittedAt: time.Now().UTC()}}
	}
	ctx := context.Background()
	for _, name := range []string{"plain", "partial"} {
		run := keelevents.RunBatch(ev, name)
		if errs := run(ctx, []*keelevents.Delivery{delivery("a", 1), delivery("b", 1)}); errs[0] != nil || errs[1] != nil {
			t.Fatalf("%s: the first batch: %v", name, errs)
		}
		// a and b redelivered beside a new event that fails: attempt 1,
		// then attempt 2, the last, which sends it to manual.
		errs := run(ctx, []*keelevents.Delivery{delivery("a", 2), delivery("poison", 1), delivery("b", 2)})
		if errs[0] != nil || errs[1] == nil || errs[2] != nil {
			t.Fatalf("%s: want only the new event failed, got %v", name, errs)
		}
		if errs := run(ctx, []*keelevents.Delivery{delivery("poison", 2), delivery("a", 3)}); errs[0] != nil || errs[1] != nil {
			t.Fatalf("%s: the last attempt: %v", name, errs)
		}
		m, err := ev.ListManual(ctx, keelevents.ListParams{Consumer: name})
		if err != nil || len(m) != 1 || m[0].Message.ID != "poison" || m[0].Attempts != 2 {
			t.Fatalf("%s: manual: %+v, %v", name, m, err)
		}
		if got := count(t, env, "SELECT count(*) FROM t_effect WHERE consumer = '"+name+"'"); got != 2 {
			t.Fatalf("%s: %d effects, want 2 (a and b)", name, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{}
	for _, name := range []string{"plain", "partial"} {
		for _, k := range []string{"a #1", "b #1", "poison #1", "poison #2"} {
			want[name+" "+k] = 1
		}
	}
	if !maps.Equal(sent, want) {
		t.Fatalf("the counterpart received %v, want each attempt once: %v", sent, want)
	}
}
