package keeldrivertest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// testInsertClaimed: a claimed insert stores the job as one claim leaves it
// (running, attempt 1, fence 1, leased to the owner), so it finishes under
// fence 1 and no claim takes it; a paused queue takes none (nil, nothing
// stored); what is decided at claim time (idempotency, flow key, batch, run
// time) is refused before anything is written.
func testInsertClaimed(t *testing.T, e *env) {
	ic, ok := e.ex.(keeldriver.InsertClaimer)
	if !ok {
		t.Skip("the driver does not implement keeldriver.InsertClaimer")
	}
	ctx := context.Background()
	ex := e.ex
	row, err := ic.JobInsertClaimed(ctx, &keeldriver.JobInsertClaimedParams{
		Job:   &keeldriver.JobInsertParams{Kind: "email", Queue: "q", Args: json.RawMessage(`{"to":"a"}`), Priority: 3, Subject: "s"},
		Owner: "w1", LeaseDuration: time.Minute,
	})
	if err != nil || row == nil {
		t.Fatalf("claimed insert: %+v %v", row, err)
	}
	if row.State != keeltype.JobStateRunning || row.Attempt != 1 || row.Fence != 1 || row.LeaseOwner != "w1" ||
		row.LeaseExpiresAt == nil || row.AttemptedAt == nil || row.Priority != 3 || row.MaxAttempts != 25 ||
		row.Subject != "s" || !sameJSON(row.Args, []byte(`{"to":"a"}`)) {
		t.Fatalf("claimed row: %+v", row)
	}
	if d := row.LeaseExpiresAt.Sub(*row.AttemptedAt); d < 59*time.Second || d > 61*time.Second {
		t.Fatalf("lease of %v, want a minute", d)
	}
	if !near(*row.AttemptedAt) || !near(row.RunAt) || row.AttemptedAt.Location() != time.UTC {
		t.Fatalf("times: attempted %v run_at %v", row.AttemptedAt, row.RunAt)
	}
	if got := get(t, ex, row.ID); got.State != keeltype.JobStateRunning || got.Fence != 1 {
		t.Fatalf("stored: %+v", got)
	}
	if got := claim(t, ex, "q", "w2", 10, nil); len(got) != 0 {
		t.Fatalf("a claim took the claimed job: %+v", got)
	}
	if res := finish(t, ex, done(row, keeltype.JobStateCompleted, nil)); !res[0].Applied {
		t.Fatalf("finishing under fence 1: %+v", res[0])
	}

	if _, err := ex.QueuePause(ctx, &keeldriver.QueuePauseParams{Name: "q", By: "user:alice"}); err != nil {
		t.Fatal(err)
	}
	row, err = ic.JobInsertClaimed(ctx, &keeldriver.JobInsertClaimedParams{
		Job: &keeldriver.JobInsertParams{Kind: "email", Queue: "q"}, Owner: "w1", LeaseDuration: time.Minute})
	if err != nil || row != nil {
		t.Fatalf("claimed insert into a paused queue: %+v %v, want nothing", row, err)
	}
	if jobs, err := ex.JobList(ctx, &keeldriver.JobListParams{Queues: []string{"q"}}); err != nil || len(jobs) != 1 {
		t.Fatalf("jobs of q after the paused insert: %d %v, want the first only", len(jobs), err)
	}

	far := t0.Add(time.Hour)
	for _, j := range []*keeldriver.JobInsertParams{
		{Kind: "email", IdempotencyKey: "k"}, {Kind: "email", FlowKey: "f"},
		{Kind: "email", BatchID: 1}, {Kind: "email", RunAt: &far},
	} {
		_, err := ic.JobInsertClaimed(ctx, &keeldriver.JobInsertClaimedParams{Job: j, Owner: "w1", LeaseDuration: time.Minute})
		if !errors.Is(err, keeltype.ErrInvalidArgument) {
			t.Fatalf("claimed insert of %+v: %v, want ErrInvalidArgument", j, err)
		}
	}
	if _, err := ic.JobInsertClaimed(ctx, &keeldriver.JobInsertClaimedParams{
		Job: &keeldriver.JobInsertParams{Kind: "email"}, Owner: "w1"}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("claimed insert without a lease: %v", err)
	}
	if jobs, err := ex.JobList(ctx, &keeldriver.JobListParams{}); err != nil || len(jobs) != 1 {
		t.Fatalf("jobs after the refused inserts: %d %v, want 1", len(jobs), err)
	}
}
