package reservation

import (
	"context"
	"testing"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
)

// testEvents is an events backbone on the in-database bus for a test
// module; startEvents runs its relay and consumers.
func testEvents[TTx any](t testing.TB, db keelsql.DB[TTx]) *keelevents.Events[TTx] {
	t.Helper()
	bus, err := keelevents.NewDatabaseBus(db, &keelevents.DatabaseBusConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	ev, err := keelevents.New(db, bus, &keelevents.Config{Logger: quiet(), StatsInterval: time.Hour, LeaseTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func startEvents[TTx any](t testing.TB, ev *keelevents.Events[TTx], client *keel.Client[TTx]) {
	t.Helper()
	if err := ev.Start(context.Background(), client); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ev.Stop(ctx)
	})
}
