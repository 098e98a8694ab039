package eventsweb_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
)

// eventFeed is the events fixture: a "stock" consumer whose handler fails
// on "r-poison" while Poisoned holds (so it goes to manual after two
// attempts), and a way to make a quarantined event.
type eventFeed struct {
	Poisoned atomic.Bool
	Applied  atomic.Int64
	emit     func(id, key, payload string) error
	conflict func(id, key, payload string) error
}

func startEvents[TTx any](t *testing.T, db keelsql.DB[TTx], client *keel.Client[TTx]) (*keelevents.Events[TTx], *eventFeed) {
	t.Helper()
	quiet := keelevents.Config{Partitions: 4, LeaseTTL: 2 * time.Second, StatsInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)}
	// A bus that forgets acknowledged messages at once lets a second
	// message with a used id reach the inbox, as from a producer outside
	// the outbox: that is how a quarantine happens.
	bus, err := keelevents.NewDatabaseBus(db, &keelevents.DatabaseBusConfig{Retention: time.Nanosecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	ev, err := keelevents.New(db, bus, &quiet)
	if err != nil {
		t.Fatal(err)
	}
	f := &eventFeed{}
	f.Poisoned.Store(true)
	if err := ev.Consume(keelevents.Consumer[TTx]{Name: "stock", Topics: []string{"stock.reserved"}, MaxAttempts: 2,
		Backoff: []time.Duration{10 * time.Millisecond},
		Handle: func(ctx context.Context, tx keelsql.Tx[TTx], d *keelevents.Delivery) error {
			if d.ID == "r-poison" && f.Poisoned.Load() {
				return errors.New("SKU 映射缺失")
			}
			f.Applied.Add(1)
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	if err := ev.Start(context.Background(), client); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = ev.Stop(ctx)
	})
	f.emit = func(id, key, payload string) error {
		return db.InTx(context.Background(), func(tx keelsql.Tx[TTx]) error {
			return ev.EmitTx(context.Background(), tx, keelevents.Event{Topic: "stock.reserved", ID: id, Key: key, Payload: json.RawMessage(payload)})
		})
	}
	f.conflict = func(id, key, payload string) error {
		ctx := context.Background()
		if err := ev.Archive(ctx); err != nil {
			return err
		}
		m := keelevents.Message{Topic: "stock.reserved", ID: id, Key: key, Type: "stock.reserved", Payload: []byte(payload),
			Digest: keelevents.Digest([]byte(payload)), EmittedAt: time.Now().UTC()}
		_, err := bus.Publish(ctx, []keelevents.Message{m})
		return err
	}
	return ev, f
}

// eventually waits for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// seedEvents makes one applied event, one manual (poison) and one
// quarantined, through the real outbox, relay, bus and inbox.
func (s *served) seedEvents() {
	t := s.t
	f := s.feed
	for _, e := range [][3]string{{"r-ok", "sku-1", `{"sku":"A-100","qty":2}`}, {"r-poison", "sku-2", `{"sku":"B-200","qty":1}`}} {
		if err := f.emit(e[0], e[1], e[2]); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the applied event", func() bool { return f.Applied.Load() >= 1 })
	// A consumer may apply an event before the relay has marked its
	// outbox row published (the mark is the relay's own write after the
	// bus acknowledged): the outbox is drained when the marks are in.
	eventually(t, "the outbox drained", func() bool {
		var topics struct {
			Data []keelevents.TopicStats `json:"data"`
		}
		s.call("vera", "GET", "/api/v1/events/topics", nil, &topics)
		return len(topics.Data) == 1 && topics.Data[0].Backlog == 0 && topics.Data[0].Published == 2
	})
	var manual struct {
		Data []keelevents.ManualEvent `json:"data"`
	}
	eventually(t, "the manual event", func() bool {
		s.call("vera", "GET", "/api/v1/events/manual", nil, &manual)
		return len(manual.Data) == 1
	})
	var q struct {
		Data []keelevents.Quarantined `json:"data"`
	}
	eventually(t, "the quarantine", func() bool {
		if err := f.conflict("r-ok", "sku-1", `{"sku":"A-100","qty":9}`); err != nil {
			t.Fatal(err)
		}
		s.call("vera", "GET", "/api/v1/events/quarantine", nil, &q)
		return len(q.Data) == 1
	})
}
