package keelrecon_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
)

// TestScheduledRuns: the leader runs the reconciler on every tick of its
// schedule, the tick being the run's cutoff, and each tick once.
func TestScheduledRuns(t *testing.T) {
	opts := &testdb.Options{Lines: keelrecon.Lines}
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		d, _ := testdb.OpenPostgres(t, opts)
		testScheduled(t, newEnv[pgx.Tx](t, d, keelsql.Pgx(d.Pool()), keel.Every(time.Second)))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		d, _ := testdb.OpenSQLite(t, opts)
		testScheduled(t, newEnv[*sql.Tx](t, d, keelsql.SQLite(d.DB()), keel.Every(time.Second)))
	})
}

func testScheduled[TTx any](t *testing.T, e *env[TTx]) {
	seedLedgers(e)
	deadline := time.Now().Add(90 * time.Second)
	var runs []*keelrecon.Run
	for {
		var err error
		runs, err = e.recon.ListRuns(context.Background(), keelrecon.RunFilter{Reconciler: "ledger"})
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, r := range runs {
			if r.State == "succeeded" {
				done++
			}
		}
		if done >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d scheduled runs finished in 90s", done)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-e.client.Stopped():
			t.Fatal("client stopped")
		}
	}
	seen := map[time.Time]bool{}
	for _, r := range runs {
		if r.Trigger != "schedule" || r.RequestedBy != keelrecon.SystemActor {
			t.Errorf("run %d: trigger %s by %s", r.ID, r.Trigger, r.RequestedBy)
		}
		if !r.Cutoff.Equal(r.Cutoff.Truncate(time.Second)) || seen[r.Cutoff] {
			t.Errorf("run %d: cutoff %s is not a tick, or a tick ran twice", r.ID, r.Cutoff)
		}
		seen[r.Cutoff] = true
	}
}
