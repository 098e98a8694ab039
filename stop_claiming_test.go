package keel_test

import (
	"context"
	"database/sql"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// TestStopClaiming: after StopClaiming the client takes no new job, even
// one whose insert wakes it, while the job it was running finishes and is
// committed; Stop then ends the client as usual.
func TestStopClaiming(t *testing.T) {
	both(t, testStopClaiming[pgx.Tx], testStopClaiming[*sql.Tx])
}

func testStopClaiming[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	release := make(chan struct{})
	var started atomic.Int32
	ws := keel.NewWorkers()
	keel.AddWorker(ws, keel.WorkerFunc[noopArgs](func(ctx context.Context, job *keel.Job[noopArgs]) error {
		started.Add(1)
		if job.Args.N == 1 {
			<-release
		}
		return nil
	}))
	c := startClient(t, d, fastConfig(ws))
	first, err := c.Insert(ctx, noopArgs{N: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the first job to start", func() bool { return started.Load() == 1 })
	c.StopClaiming()
	second, err := c.Insert(ctx, noopArgs{N: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	waitFor(t, 10*time.Second, "the running job to be committed", func() bool {
		j, err := c.JobGet(ctx, first.Job.ID)
		return err == nil && j.State == keeltype.JobStateCompleted
	})
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Stop(stopCtx); err != nil {
		t.Fatalf("Stop after StopClaiming: %v", err)
	}
	j, err := c.JobGet(ctx, second.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != keeltype.JobStateAvailable || started.Load() != 1 {
		t.Fatalf("the job inserted after StopClaiming is %s, %d jobs started; want available and 1", j.State, started.Load())
	}
}
