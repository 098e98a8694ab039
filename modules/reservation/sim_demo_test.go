package reservation

import (
	"context"
	"testing"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module"
)

// The demo seeds its categories once, and each round adds paid
// reservations that come due a minute later, a waitlisted user and
// check-ins: a scan a minute on releases the no-shows and promotes.
func TestDemoRounds(t *testing.T) {
	e := newSQLiteEnv(t)
	ctx := keel.WithActor(context.Background(), "system:demo")
	m := e.module(t)
	resources, err := m.seedDemo(ctx)
	if err != nil || len(resources) != 3 {
		t.Fatalf("seed: %v %v", resources, err)
	}
	if again, err := m.seedDemo(ctx); err != nil || again[0].ID != resources[0].ID {
		t.Fatalf("second seed: %v %v", again, err)
	}
	for i := 0; i < 4; i++ {
		if err := m.demoStep(ctx, resources, i); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		e.clock.Add(demoEvery)
	}
	// Desk: one paid, one checked in; parking: two paid; trial: two paid;
	// each slot with a user waiting.
	counts, _ := m.StateCounts(ctx)
	if counts[StatePaid] != 5 || counts[StateCheckedIn] != 1 {
		t.Fatalf("after four rounds: %v", counts)
	}
	e.clock.Add(time.Minute)
	run := mustScan(t, m)
	// The desk's and the parking's no-shows are released and each slot's
	// waitlisted user is offered a place; the trial category is in dry run.
	if run.Released != 3 || run.Promoted != 2 || run.DryRun != 2 {
		t.Fatalf("scan a minute later: %+v", run)
	}
	noDrift(t, m)
}

// Start with Demo runs the loop until Stop; Stop is idempotent.
func TestDemoStartStop(t *testing.T) {
	e := newSQLiteEnv(t)
	m, err := New(&module.Host[sqlTx]{DB: e.db, Logger: quiet(), Demo: true, Events: testEvents(t, e.db)}, WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	client, err := keel.NewClient(e.driver, &keel.Config{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background(), client); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first demo round", func() bool {
		counts, err := m.StateCounts(context.Background())
		return err == nil && counts[StatePaid] >= 2
	})
	stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Stop(stop); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(stop); err != nil {
		t.Fatal(err)
	}
}
