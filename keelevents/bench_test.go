package keelevents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
)

// BenchmarkLatencyPostgres offers b.N events at 1,000/s on PostgreSQL with
// the in-database bus and reports the time from EmitTx's commit to the end
// of the consumer's handler (its inbox transaction commits right after):
// p50 and p99 in ms. One process: the EmitTx wakes the relay, the publish
// wakes the subscriber.
func BenchmarkLatencyPostgres(b *testing.B) {
	env := pgEnv(b)
	bus, err := keelevents.NewDatabaseBus(env.db, &keelevents.DatabaseBusConfig{Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer bus.Close()
	tb := &timedBus{Bus: bus, start: map[string]time.Time{}, end: map[string]time.Time{}}
	ev, err := keelevents.New(env.db, tb, &keelevents.Config{Logger: quiet(), StatsInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	committed := map[string]time.Time{}
	handled := map[string]time.Time{}
	all := make(chan struct{})
	n := b.N
	err = ev.Consume(keelevents.Consumer[pgx.Tx]{Name: "bench", Topics: []string{"bench.latency"},
		Handle: func(ctx context.Context, tx keelsql.Tx[pgx.Tx], d *keelevents.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			handled[d.ID] = time.Now()
			if len(handled) == n {
				close(all)
			}
			return nil
		}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	client, err := keel.NewClient(env.drv, &keel.Config{Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	if err := ev.Start(ctx, client); err != nil {
		b.Fatal(err)
	}
	defer ev.Stop(ctx)
	b.ResetTimer()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for i := range n {
		<-tick.C
		id := fmt.Sprintf("e-%d", i)
		err := env.db.InTx(ctx, func(tx keelsql.Tx[pgx.Tx]) error {
			return ev.EmitTx(ctx, tx, keelevents.Event{Topic: "bench.latency", ID: id, Key: fmt.Sprintf("k%d", i%64), Payload: json.RawMessage(`{}`)})
		})
		if err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		committed[id] = time.Now()
		mu.Unlock()
	}
	select {
	case <-all:
	case <-time.After(time.Minute):
		b.Fatal("not every event was handled")
	}
	b.StopTimer()
	lat := make([]time.Duration, 0, n)
	for id, c := range committed {
		lat = append(lat, max(0, handled[id].Sub(c)))
	}
	var toPub, pubDur, toHandle []time.Duration
	for id, c := range committed {
		toPub = append(toPub, tb.start[id].Sub(c))
		pubDur = append(pubDur, tb.end[id].Sub(tb.start[id]))
		toHandle = append(toHandle, handled[id].Sub(tb.end[id]))
	}
	for _, l := range [][]time.Duration{toPub, pubDur, toHandle} {
		slices.Sort(l)
		b.Logf("p50 %v p90 %v", l[len(l)/2], l[len(l)*9/10])
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

type timedBus struct {
	keelevents.Bus
	mu         sync.Mutex
	start, end map[string]time.Time
}

func (t *timedBus) Publish(ctx context.Context, msgs []keelevents.Message) (int, error) {
	s := time.Now()
	n, err := t.Bus.Publish(ctx, msgs)
	e := time.Now()
	t.mu.Lock()
	for _, m := range msgs {
		if _, ok := t.start[m.ID]; !ok {
			t.start[m.ID], t.end[m.ID] = s, e
		}
	}
	t.mu.Unlock()
	return n, err
}
