package keelevents_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
)

// TestEmitMany: events written by one EmitManyTx are delivered in the
// order given per key, once each; a second call with the same events is a
// no-op, one with another payload for an id is ErrConflict and rolls back
// with its transaction; invalid input writes nothing.
func TestEmitMany(t *testing.T) { each(t, testEmitMany[pgx.Tx], testEmitMany[*sql.Tx]) }

func testEmitMany[TTx any](t *testing.T, env *tenv[TTx]) {
	ev := newEvents(t, env, nil)
	var mu sync.Mutex
	seen := map[string][]int{}
	err := ev.Consume(keelevents.Consumer[TTx]{
		Name: "many", Topics: []string{"stock.>"}, Ordered: true,
		Handle: func(ctx context.Context, tx keelsql.Tx[TTx], d *keelevents.Delivery) error {
			var body struct{ N int }
			if err := json.Unmarshal(d.Payload, &body); err != nil {
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
	ctx := context.Background()
	const keys, per = 5, 40
	var evs []keelevents.Event
	for n := range per {
		for k := range keys {
			evs = append(evs, keelevents.Event{Topic: "stock.moved", ID: fmt.Sprintf("k%d:%d", k, n), Key: fmt.Sprintf("sku-%d", k),
				Payload: json.RawMessage(fmt.Sprintf(`{"N": %d}`, n)), Headers: map[string]string{"n": fmt.Sprint(n)}})
		}
	}
	emitMany := func(evs []keelevents.Event) error {
		return env.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error { return ev.EmitManyTx(ctx, tx, evs) })
	}
	if err := emitMany(evs); err != nil {
		t.Fatal(err)
	}
	if err := emitMany(evs); err != nil {
		t.Fatalf("the same events again: %v", err)
	}
	other := append([]keelevents.Event{{Topic: "stock.moved", ID: "new:1", Key: "sku-0", Payload: json.RawMessage(`{"N": 999}`)}}, evs[3])
	other[1].Payload = json.RawMessage(`{"N": -1}`)
	if err := emitMany(other); !errors.Is(err, keelevents.ErrConflict) {
		t.Fatalf("an id again with another payload: %v, want ErrConflict", err)
	}
	bad := []keelevents.Event{{Topic: "stock.moved", ID: "new:2", Key: "sku-0", Payload: json.RawMessage(`{}`)},
		{Topic: "stock.moved", ID: "new:2", Key: "sku-0", Payload: json.RawMessage(`{}`)}}
	if err := emitMany(bad); !errors.Is(err, keelevents.ErrInvalid) {
		t.Fatalf("one id twice in a call: %v, want ErrInvalid", err)
	}
	bad = []keelevents.Event{{Topic: "stock.moved", ID: "new:3", Key: "sku-0", Payload: json.RawMessage(`{}`)},
		{Topic: "Bad Topic", ID: "new:4", Key: "sku-0", Payload: json.RawMessage(`{}`)}}
	if err := emitMany(bad); !errors.Is(err, keelevents.ErrInvalid) {
		t.Fatalf("an invalid topic: %v, want ErrInvalid", err)
	}
	eventually(t, "every event handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, ns := range seen {
			n += len(ns)
		}
		return n == keys*per
	})
	if n := count(t, env, "SELECT count(*) FROM keel_events_outbox"); n != keys*per {
		t.Fatalf("outbox holds %d rows, want %d", n, keys*per)
	}
	mu.Lock()
	defer mu.Unlock()
	for k, ns := range seen {
		for i, n := range ns {
			if n != i {
				t.Fatalf("key %s handled out of order: %v", k, ns)
			}
		}
	}
	d, err := ev.GetEvent(ctx, "stock.moved", "k2:7")
	if err != nil {
		t.Fatal(err)
	}
	if d.Key != "sku-2" || string(d.Payload) != `{"N":7}` {
		t.Fatalf("event detail %+v", d)
	}
}
