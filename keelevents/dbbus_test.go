package keelevents_test

import (
	"context"
	"database/sql"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/bustest"
)

func TestDatabaseBusConformance(t *testing.T) {
	each(t, runBusSuite[pgx.Tx], runBusSuite[*sql.Tx])
}

func runBusSuite[TTx any](t *testing.T, env *tenv[TTx]) {
	bustest.Run(t, func(t *testing.T) keelevents.Bus {
		b, err := keelevents.NewDatabaseBus(env.db, &keelevents.DatabaseBusConfig{Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

// A handler running longer than the ack wait keeps its delivery: the
// in-database bus extends the lease while the handler runs.
func TestDatabaseBusSlowHandler(t *testing.T) {
	each(t, testSlowHandler[pgx.Tx], testSlowHandler[*sql.Tx])
}

func testSlowHandler[TTx any](t *testing.T, env *tenv[TTx]) {
	b, err := keelevents.NewDatabaseBus(env.db, &keelevents.DatabaseBusConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var calls atomic.Int32
	done := make(chan struct{})
	ctx := context.Background()
	s, err := b.Subscribe(ctx, keelevents.Subscription{Consumer: "slow", Topics: []string{"s.x"}, AckWait: time.Second},
		func(ctx context.Context, d *keelevents.Delivery) error {
			if calls.Add(1) == 1 {
				// The handler's own slow work, three ack waits long. The
				// ack wait is a second: with 300 ms, one stall of the
				// extension on a loaded machine (its statement waiting
				// for the database) let the lease lapse, and the
				// redelivery that followed was right.
				time.Sleep(3 * time.Second)
				close(done)
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	if _, err := b.Publish(ctx, []keelevents.Message{bustest.Msg("s.x", "slow-1", "k", 0, `{}`)}); err != nil {
		t.Fatal(err)
	}
	<-done
	eventually(t, "the acknowledgement", func() bool {
		return count(t, env, "SELECT count(*) FROM keel_events_bus_delivery") == 0
	})
	if n := calls.Load(); n != 1 {
		t.Fatalf("a handler slower than the ack wait was called %d times", n)
	}
}
