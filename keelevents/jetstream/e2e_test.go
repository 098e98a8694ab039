package jetstream_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/jetstream/jstest"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelsql"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// pgEvents is the events backbone on a fresh PostgreSQL schema with a
// consumer "fx" that records one effect row per application in fx.
type pgEvents struct {
	db keelsql.DB[pgx.Tx]
	ev *keelevents.Events[pgx.Tx]
}

func newPGEvents(t *testing.T, bus keelevents.Bus, topics []string, ordered bool) *pgEvents {
	t.Helper()
	ctx := context.Background()
	d, _ := testdb.OpenPostgres(t, &testdb.Options{Lines: func(dialect string) []keelmigrate.Line {
		return []keelmigrate.Line{keelevents.Line(dialect)}
	}})
	db := keelsql.Pgx(d.Pool())
	if _, err := db.Exec(ctx, `CREATE TABLE fx (id text PRIMARY KEY, n int NOT NULL DEFAULT 1)`); err != nil {
		t.Fatal(err)
	}
	ev, err := keelevents.New(db, bus, &keelevents.Config{Partitions: 8, LeaseTTL: 2 * time.Second,
		PublishTimeout: 2 * time.Second, StatsInterval: time.Hour, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	err = ev.Consume(keelevents.Consumer[pgx.Tx]{Name: "fx", Topics: topics, Ordered: ordered, AckWait: 5 * time.Second,
		Backoff: []time.Duration{50 * time.Millisecond},
		Handle: func(ctx context.Context, tx keelsql.Tx[pgx.Tx], d *keelevents.Delivery) error {
			_, err := tx.Exec(ctx, `INSERT INTO fx (id) VALUES ($1) ON CONFLICT (id) DO UPDATE SET n = fx.n + 1`, d.ID)
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	client, err := keel.NewClient(d, &keel.Config{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Start(ctx, client); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ev.Stop(sctx); err != nil {
			t.Errorf("stopping events: %v", err)
		}
	})
	return &pgEvents{db: db, ev: ev}
}

func (p *pgEvents) emit(t *testing.T, from, to int) {
	t.Helper()
	ctx := context.Background()
	for i := from; i < to; i += 25 {
		err := p.db.InTx(ctx, func(tx keelsql.Tx[pgx.Tx]) error {
			for j := i; j < min(i+25, to); j++ {
				if err := p.ev.EmitTx(ctx, tx, keelevents.Event{Topic: "orders.placed", ID: fmt.Sprintf("o-%05d", j),
					Key: fmt.Sprintf("order-%d", j%40), Payload: []byte(fmt.Sprintf(`{"n":%d}`, j))}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func (p *pgEvents) scalar(t *testing.T, q string) int {
	t.Helper()
	var n int
	if err := p.db.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// TestRelayAndInboxSurviveServerKill: outbox → relay → JetStream → inbox on
// PostgreSQL while the nats-server process is SIGKILLed and restarted.
// Events emitted before, during and after the outage all reach the
// consumer, each with exactly one business effect.
func TestRelayAndInboxSurviveServerKill(t *testing.T) {
	t.Parallel()
	proc := jstest.StartProcess(t)
	cfg := testConfig(proc.URL())
	cfg.PublishTimeout = 2 * time.Second
	bus := newBus(t, cfg)
	defer bus.Close()
	p := newPGEvents(t, bus, []string{"orders.>"}, true)

	const total = 1500
	p.emit(t, 0, total/3)
	waitUntil(t, 60*time.Second, "a first effect", func() bool { return p.scalar(t, `SELECT count(*) FROM fx`) > 0 })
	proc.Kill()
	waitUntil(t, 30*time.Second, "the bus to notice the broker is gone", func() bool { return bus.Conn().Status() != nats.CONNECTED })
	p.emit(t, total/3, 2*total/3) // committed while the broker is down
	proc.Start()
	p.emit(t, 2*total/3, total)

	waitUntil(t, 120*time.Second, "every event applied", func() bool { return p.scalar(t, `SELECT count(*) FROM fx`) == total })
	if n := p.scalar(t, `SELECT count(*) FROM fx WHERE n <> 1`); n != 0 {
		t.Fatalf("%d events had more than one business effect", n)
	}
	stats, err := p.ev.TopicStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("topic stats after the outage: %+v", stats)
}
