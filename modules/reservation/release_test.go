package reservation

import (
	"context"
	"testing"
	"time"

	"database/sql"
	"github.com/jackc/pgx/v5"
)

func TestReleaseAtTheReleasePoint(t *testing.T) {
	runBoth(t, testReleaseAtTheReleasePoint[pgx.Tx], testReleaseAtTheReleasePoint[*sql.Tx])
}

// Exactly at start+grace the reservation is released; one second before it
// is not.
func testReleaseAtTheReleasePoint[TTx any](t *testing.T, e *env[TTx]) {
	m := e.module(t)
	f := setup(t, m, 2)
	r := paid(t, m, f.slot.ID, "u1")
	due := t0.Add(15 * time.Minute)
	if r.ExpectedReleaseAt == nil || !r.ExpectedReleaseAt.Equal(due) {
		t.Fatalf("expected_release_at = %v, want %v", r.ExpectedReleaseAt, due)
	}
	e.clock.Set(due.Add(-time.Second))
	if run := mustScan(t, m); run.Released != 0 {
		t.Fatalf("released %d one second early", run.Released)
	}
	wantState(t, m, r.ID, StatePaid)
	e.clock.Set(due)
	run := mustScan(t, m)
	if run.Released != 1 || run.Scanned != 1 || run.RestoreOK != 1 {
		t.Fatalf("run at the release point: %+v", run)
	}
	got := wantState(t, m, r.ID, StateReleased)
	if got.Version != r.Version+1 || !got.ReleasedAt.Equal(due) || !got.AppealUntil.Equal(due.Add(30*time.Minute)) {
		t.Fatalf("released row: %+v", got)
	}
	if n := held(t, m, f.slot.ID); n != 0 {
		t.Fatalf("held = %d after release, want 0", n)
	}
	noDrift(t, m)
	hist, err := m.History(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := hist[len(hist)-1]
	if last.FromState != StatePaid || last.ToState != StateReleased || last.Actor != "system:reservation.scan" {
		t.Fatalf("last history entry: %+v", last)
	}
}
