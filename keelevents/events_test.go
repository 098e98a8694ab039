package keelevents_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
)

// effectTable is a business effect: one row per (consumer, event) applied.
func effectTable[TTx any](t *testing.T, env *tenv[TTx]) {
	t.Helper()
	if _, err := env.db.Exec(context.Background(), `CREATE TABLE t_effect (consumer text NOT NULL, event_id text NOT NULL,
		event_key text NOT NULL, PRIMARY KEY (consumer, event_id))`); err != nil {
		t.Fatal(err)
	}
}

func insertEffect(driver string) string {
	if driver == "postgres" {
		return `INSERT INTO t_effect (consumer, event_id, event_key) VALUES ($1, $2, $3)`
	}
	return `INSERT INTO t_effect (consumer, event_id, event_key) VALUES (?1, ?2, ?3)`
}

func TestEndToEnd(t *testing.T) { each(t, testEndToEnd[pgx.Tx], testEndToEnd[*sql.Tx]) }

func testEndToEnd[TTx any](t *testing.T, env *tenv[TTx]) {
	effectTable(t, env)
	ev := newEvents(t, env, nil)
	var mu sync.Mutex
	seen := map[string][]int{}
	err := ev.Consume(keelevents.Consumer[TTx]{
		Name: "projection", Topics: []string{"order.>"}, Ordered: true,
		Handle: func(ctx context.Context, tx keelsql.Tx[TTx], d *keelevents.Delivery) error {
			var body struct{ N int }
			if err := json.Unmarshal(d.Payload, &body); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, insertEffect(env.driver), "projection", d.ID, d.Key); err != nil {
				return err
			}
			mu.Lock()
			seen[d.Key] = append(seen[d.Key], body.N)
			mu.Unlock()
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, env, ev)
	const keys, per = 10, 20
	for n := range per {
		for k := range keys {
			emit(t, env, ev, keelevents.Event{Topic: "order.updated", ID: fmt.Sprintf("o%d:v%d", k, n), Key: fmt.Sprintf("order-%d", k),
				Payload: json.RawMessage(fmt.Sprintf(`{"N": %d}`, n))})
		}
	}
	eventually(t, "every effect", func() bool { return count(t, env, "SELECT count(*) FROM t_effect") == keys*per })
	mu.Lock()
	for k, ns := range seen {
		for i, n := range ns {
			if n != i {
				t.Fatalf("key %s handled out of order: %v", k, ns)
			}
		}
	}
	mu.Unlock()
	ctx := context.Background()
	eventually(t, "the outbox marked", func() bool {
		ts, err := ev.TopicStats(ctx)
		return err == nil && len(ts) == 1 && ts[0].Backlog == 0 && ts[0].Published == keys*per
	})
	cs, err := ev.ConsumerStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Lag != 0 || cs[0].Applied != keys*per || cs[0].OldestUnacked != nil {
		t.Fatalf("consumer stats %+v", cs)
	}
	d, err := ev.GetEvent(ctx, "order.updated", "o3:v7")
	if err != nil {
		t.Fatal(err)
	}
	if d.Key != "order-3" || string(d.Payload) != `{"N":7}` || d.PublishedAt == nil || len(d.Inbox) != 1 || d.Inbox[0].State != "applied" {
		t.Fatalf("event detail %+v", d)
	}
}

func TestEmitIdempotent(t *testing.T) {
	each(t, testEmitIdempotent[pgx.Tx], testEmitIdempotent[*sql.Tx])
}

func testEmitIdempotent[TTx any](t *testing.T, env *tenv[TTx]) {
	ev := newEvents(t, env, nil)
	ctx := context.Background()
	e1 := keelevents.Event{Topic: "payment.succeeded", ID: "pay-1:succeed", Key: "order-1", Payload: json.RawMessage(`{"amount": 100}`)}
	emit(t, env, ev, e1)
	emit(t, env, ev, keelevents.Event{Topic: e1.Topic, ID: e1.ID, Key: e1.Key, Payload: json.RawMessage(`{"amount":100}`)}) // same, compacted
	other := e1
	other.Payload = json.RawMessage(`{"amount": 200}`)
	err := env.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error { return ev.EmitTx(ctx, tx, other) })
	if !errors.Is(err, keelevents.ErrConflict) {
		t.Fatalf("same id, other payload: %v, want ErrConflict", err)
	}
	// Rolled back: nothing is written, so nothing can be published.
	rolled := keelevents.Event{Topic: "payment.succeeded", ID: "pay-2:succeed", Key: "order-2", Payload: json.RawMessage(`{}`)}
	boom := errors.New("business rule failed")
	err = env.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		if err := ev.EmitTx(ctx, tx, rolled); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if n := count(t, env, "SELECT count(*) FROM keel_events_outbox"); n != 1 {
		t.Fatalf("outbox holds %d rows, want 1", n)
	}
	var digest string
	if err := env.db.QueryRow(ctx, "SELECT digest FROM keel_events_outbox").Scan(&digest); err != nil {
		t.Fatal(err)
	}
	if digest != keelevents.Digest([]byte(`{"amount":100}`)) {
		t.Fatalf("digest %s is not the compacted payload's", digest)
	}
}

func TestEmitInvalid(t *testing.T) { each(t, testEmitInvalid[pgx.Tx], testEmitInvalid[*sql.Tx]) }

func testEmitInvalid[TTx any](t *testing.T, env *tenv[TTx]) {
	ev := newEvents(t, env, nil)
	ctx := context.Background()
	ok := keelevents.Event{Topic: "a.b", ID: "id-1", Key: "k", Payload: json.RawMessage(`{}`)}
	bad := map[string]func(e *keelevents.Event){
		"empty topic":      func(e *keelevents.Event) { e.Topic = "" },
		"upper topic":      func(e *keelevents.Event) { e.Topic = "A.b" },
		"empty token":      func(e *keelevents.Event) { e.Topic = "a..b" },
		"wildcard topic":   func(e *keelevents.Event) { e.Topic = "a.>" },
		"long topic":       func(e *keelevents.Event) { e.Topic = strings.Repeat("a", 201) },
		"empty id":         func(e *keelevents.Event) { e.ID = "" },
		"space in id":      func(e *keelevents.Event) { e.ID = "a b" },
		"long id":          func(e *keelevents.Event) { e.ID = strings.Repeat("x", 201) },
		"empty key":        func(e *keelevents.Event) { e.Key = "" },
		"control in key":   func(e *keelevents.Event) { e.Key = "k\x00" },
		"invalid utf8 key": func(e *keelevents.Event) { e.Key = "\xff" },
		"empty payload":    func(e *keelevents.Event) { e.Payload = nil },
		"not json":         func(e *keelevents.Event) { e.Payload = json.RawMessage(`{"a":`) },
		"huge payload": func(e *keelevents.Event) {
			e.Payload = json.RawMessage(`"` + strings.Repeat("x", keelevents.MaxPayload) + `"`)
		},
		"bad header name":   func(e *keelevents.Event) { e.Headers = map[string]string{"a b": "x"} },
		"control in header": func(e *keelevents.Event) { e.Headers = map[string]string{"a": "\n"} },
	}
	for name, mut := range bad {
		e := ok
		mut(&e)
		err := env.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error { return ev.EmitTx(ctx, tx, e) })
		if !errors.Is(err, keelevents.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if n := count(t, env, "SELECT count(*) FROM keel_events_outbox"); n != 0 {
		t.Fatalf("bad input wrote %d rows", n)
	}
}

func TestQuarantine(t *testing.T) { each(t, testQuarantine[pgx.Tx], testQuarantine[*sql.Tx]) }

func testQuarantine[TTx any](t *testing.T, env *tenv[TTx]) {
	effectTable(t, env)
	// Retention 1ns: the bus forgets acknowledged messages at the next
	// prune, so a later message with the same id reaches the inbox, as it
	// would from a producer outside the outbox or past a duplicate window.
	bus, err := keelevents.NewDatabaseBus(env.db, &keelevents.DatabaseBusConfig{Retention: time.Nanosecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	ev, err := keelevents.New(env.db, bus, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	if err := ev.Consume(keelevents.Consumer[TTx]{Name: "ledger", Topics: []string{"pay.done"},
		Handle: func(ctx context.Context, tx keelsql.Tx[TTx], d *keelevents.Delivery) error {
			calls.Add(1)
			_, err := tx.Exec(ctx, insertEffect(env.driver), "ledger", d.ID, string(d.Payload))
			return err
		}}); err != nil {
		t.Fatal(err)
	}
	start(t, env, ev)
	emit(t, env, ev, keelevents.Event{Topic: "pay.done", ID: "p-1", Key: "o-1", Payload: json.RawMessage(`{"amount":100}`)})
	eventually(t, "the effect", func() bool { return count(t, env, "SELECT count(*) FROM t_effect") == 1 })
	// The acknowledgement follows the handler's commit: until it lands the
	// bus still holds p-1 and would absorb the conflicting copy below as a
	// duplicate publish, so no quarantine could ever appear.
	eventually(t, "the acknowledgement", func() bool {
		return count(t, env, "SELECT count(*) FROM keel_events_bus_delivery") == 0
	})
	ctx := context.Background()
	if err := ev.Archive(ctx); err != nil { // prunes the bus
		t.Fatal(err)
	}
	if n := count(t, env, "SELECT count(*) FROM keel_events_bus_message"); n != 0 {
		t.Fatalf("the bus still holds %d messages after the prune", n)
	}
	m := keelevents.Message{Topic: "pay.done", ID: "p-1", Key: "o-1", Type: "pay.done", Payload: []byte(`{"amount":999}`),
		Digest: keelevents.Digest([]byte(`{"amount":999}`)), EmittedAt: time.Now().UTC()}
	for range 2 {
		if _, err := bus.Publish(ctx, []keelevents.Message{m}); err != nil {
			t.Fatal(err)
		}
		if err := ev.Archive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the quarantine", func() bool {
		q, err := ev.ListQuarantine(ctx, keelevents.ListParams{})
		return err == nil && len(q) == 1 && q[0].Seen >= 1
	})
	q, _ := ev.ListQuarantine(ctx, keelevents.ListParams{Consumer: "ledger"})
	if string(q[0].AppliedPayload) != `{"amount":100}` || string(q[0].Payload) != `{"amount":999}` {
		t.Fatalf("quarantine keeps %s and %s", q[0].AppliedPayload, q[0].Payload)
	}
	if calls.Load() != 1 || count(t, env, "SELECT count(*) FROM t_effect") != 1 {
		t.Fatalf("the conflicting payload was applied: %d calls", calls.Load())
	}
	cs, err := ev.ConsumerStats(ctx)
	if err != nil || cs[0].Quarantined != 1 {
		t.Fatalf("consumer stats %+v, %v", cs, err)
	}
}

func TestPoisonManualReplay(t *testing.T) {
	each(t, testPoisonManualReplay[pgx.Tx], testPoisonManualReplay[*sql.Tx])
}

func testPoisonManualReplay[TTx any](t *testing.T, env *tenv[TTx]) {
	effectTable(t, env)
	ev := newEvents(t, env, nil)
	var poisoned atomic.Bool
	poisoned.Store(true)
	var calls sync.Map
	if err := ev.Consume(keelevents.Consumer[TTx]{Name: "stock", Topics: []string{"stock.reserved"}, Ordered: true,
		MaxAttempts: 3, Backoff: []time.Duration{10 * time.Millisecond},
		Handle: func(ctx context.Context, tx keelsql.Tx[TTx], d *keelevents.Delivery) error {
			n, _ := calls.LoadOrStore(d.ID, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			if d.ID == "r-1" && poisoned.Load() {
				return errors.New("cannot parse the SKU")
			}
			_, err := tx.Exec(ctx, insertEffect(env.driver), "stock", d.ID, d.Key)
			return err
		}}); err != nil {
		t.Fatal(err)
	}
	start(t, env, ev)
	emit(t, env, ev, keelevents.Event{Topic: "stock.reserved", ID: "r-1", Key: "sku-1", Payload: json.RawMessage(`{"q":1}`)})
	emit(t, env, ev, keelevents.Event{Topic: "stock.reserved", ID: "r-2", Key: "sku-1", Payload: json.RawMessage(`{"q":2}`)})
	// The poison event goes to manual after 3 attempts; the next one of
	// its key then proceeds.
	eventually(t, "the next event of the key", func() bool { return count(t, env, "SELECT count(*) FROM t_effect") == 1 })
	ctx := context.Background()
	list, err := ev.ListManual(ctx, keelevents.ListParams{State: "manual"})
	if err != nil || len(list) != 1 {
		t.Fatalf("manual list %+v, %v", list, err)
	}
	m := list[0]
	if m.Message.ID != "r-1" || m.Attempts != 3 || string(m.Message.Payload) != `{"q":1}` || !strings.Contains(m.LastError, "SKU") {
		t.Fatalf("manual event %+v", m)
	}
	if err := ev.Replay(ctx, m.ID, ""); !errors.Is(err, keelevents.ErrInvalid) {
		t.Fatalf("replay without a reason: %v", err)
	}
	actor := keel.WithActor(ctx, "user:ops")
	if err := ev.Replay(actor, m.ID, "still broken"); err == nil {
		t.Fatal("a replay whose handler fails succeeded")
	}
	poisoned.Store(false)
	if err := ev.Replay(actor, m.ID, "SKU mapping fixed"); err != nil {
		t.Fatal(err)
	}
	if err := ev.Replay(actor, m.ID, "again"); !errors.Is(err, keelevents.ErrNotFound) {
		t.Fatalf("second replay: %v, want ErrNotFound", err)
	}
	if n := count(t, env, "SELECT count(*) FROM t_effect"); n != 2 {
		t.Fatalf("%d effects after the replay, want 2", n)
	}
	got, _ := ev.GetManual(ctx, m.ID)
	if got.State != "replayed" || got.ReplayedAt == nil {
		t.Fatalf("after replay: %+v", got)
	}
	d, err := ev.GetEvent(ctx, "stock.reserved", "r-1")
	if err != nil || d.Inbox[0].State != "applied" {
		t.Fatalf("event after replay %+v, %v", d, err)
	}
	client, _ := keel.NewClient(env.drv, &keel.Config{Logger: quiet()})
	rows, err := client.AuditList(ctx, &keel.AuditListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, r := range rows {
		actions = append(actions, r.Action+"/"+r.Actor)
	}
	if fmt.Sprint(actions) != "[events.replay/user:ops events.replay_failed/user:ops]" {
		t.Fatalf("audit log %v", actions)
	}
}

func TestApplyIfNewer(t *testing.T) { each(t, testApplyIfNewer[pgx.Tx], testApplyIfNewer[*sql.Tx]) }

func testApplyIfNewer[TTx any](t *testing.T, env *tenv[TTx]) {
	ev := newEvents(t, env, nil)
	ctx := context.Background()
	var got []bool
	for _, v := range []int64{41, 43, 42, 43, 44} {
		err := env.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
			ok, err := ev.ApplyIfNewer(ctx, tx, "waybill", "WB-1", v)
			got = append(got, ok)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(got) != "[true true false false true]" {
		t.Fatalf("applied %v", got)
	}
	if n := count(t, env, "SELECT count(*) FROM keel_events_version_stale"); n != 1 {
		t.Fatalf("%d stale versions recorded, want 1 (42)", n)
	}
}

func TestArchive(t *testing.T) { each(t, testArchive[pgx.Tx], testArchive[*sql.Tx]) }

func testArchive[TTx any](t *testing.T, env *tenv[TTx]) {
	cfg := fastConfig()
	cfg.Retention = time.Nanosecond
	ev := newEvents(t, env, cfg)
	start(t, env, ev)
	e := keelevents.Event{Topic: "export.done", ID: "job-9:shard-1", Key: "job-9", Payload: json.RawMessage(`{"rows":5}`)}
	emit(t, env, ev, e)
	ctx := context.Background()
	eventually(t, "the publish", func() bool {
		return count(t, env, "SELECT count(*) FROM keel_events_outbox WHERE published_at IS NOT NULL") == 1
	})
	if err := ev.Archive(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, env, "SELECT count(*) FROM keel_events_outbox"); n != 0 {
		t.Fatalf("%d rows left in the outbox", n)
	}
	d, err := ev.GetEvent(ctx, e.Topic, e.ID)
	if err != nil || !d.Archived || d.Payload != nil || d.Digest != keelevents.Digest([]byte(`{"rows":5}`)) || d.Key != "job-9" {
		t.Fatalf("archived event %+v, %v", d, err)
	}
	sums, err := ev.ListArchive(ctx, e.Topic, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 10)
	if err != nil || len(sums) != 1 || sums[0].ID != e.ID {
		t.Fatalf("archive list %+v, %v", sums, err)
	}
	emit(t, env, ev, e) // same id and payload after archiving: still a no-op
	e.Payload = json.RawMessage(`{"rows":6}`)
	err = env.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error { return ev.EmitTx(ctx, tx, e) })
	if !errors.Is(err, keelevents.ErrConflict) {
		t.Fatalf("other payload after archiving: %v", err)
	}
	if n := count(t, env, "SELECT count(*) FROM keel_events_outbox"); n != 0 {
		t.Fatalf("an archived id was emitted again")
	}
	ts, err := ev.TopicStats(ctx)
	if err != nil || len(ts) != 1 || ts[0].Archived != 1 || ts[0].Backlog != 0 {
		t.Fatalf("topic stats %+v, %v", ts, err)
	}
}

// flakyBus stores every publish but reports the first few as unknown, as a
// timeout after the broker stored the message would.
type flakyBus struct {
	keelevents.Bus
	unknown atomic.Int32
}

func (f *flakyBus) Publish(ctx context.Context, msgs []keelevents.Message) (int, error) {
	n, err := f.Bus.Publish(ctx, msgs)
	if err == nil && f.unknown.Add(-1) >= 0 {
		return 0, fmt.Errorf("%w: timed out waiting for the acknowledgement", keelevents.ErrOutcomeUnknown)
	}
	return n, err
}

func TestUnknownOutcomeRepublished(t *testing.T) {
	each(t, testUnknownOutcome[pgx.Tx], testUnknownOutcome[*sql.Tx])
}

func testUnknownOutcome[TTx any](t *testing.T, env *tenv[TTx]) {
	effectTable(t, env)
	inner, err := keelevents.NewDatabaseBus(env.db, &keelevents.DatabaseBusConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inner.Close() })
	bus := &flakyBus{Bus: inner}
	bus.unknown.Store(3)
	cfg := fastConfig()
	cfg.MaxPoll = 10 * time.Millisecond
	ev, err := keelevents.New(env.db, bus, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	if err := ev.Consume(keelevents.Consumer[TTx]{Name: "c", Topics: []string{"t.x"},
		Handle: func(ctx context.Context, tx keelsql.Tx[TTx], d *keelevents.Delivery) error {
			calls.Add(1)
			_, err := tx.Exec(ctx, insertEffect(env.driver), "c", d.ID, d.Key)
			return err
		}}); err != nil {
		t.Fatal(err)
	}
	start(t, env, ev)
	emit(t, env, ev, keelevents.Event{Topic: "t.x", ID: "once", Key: "k", Payload: json.RawMessage(`{}`)})
	ctx := context.Background()
	eventually(t, "the event marked after unknown outcomes", func() bool {
		ts, err := ev.TopicStats(ctx)
		return err == nil && len(ts) == 1 && ts[0].Backlog == 0
	})
	ts, _ := ev.TopicStats(ctx)
	if ts[0].Unknown != 3 || ts[0].Attempts != 4 {
		t.Fatalf("stats after 3 unknown outcomes: %+v", ts[0])
	}
	eventually(t, "the effect", func() bool { return count(t, env, "SELECT count(*) FROM t_effect") == 1 })
	if n := count(t, env, "SELECT count(*) FROM keel_events_bus_message"); n != 1 {
		t.Fatalf("%d bus messages for one event republished 4 times", n)
	}
	if calls.Load() != 1 {
		t.Fatalf("handler called %d times", calls.Load())
	}
}
