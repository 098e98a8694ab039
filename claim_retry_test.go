package keel_test

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// TestFailedClaimRetried: a claim that fails (a statement timed out on a
// loaded database, a dropped connection) says nothing about the backlog,
// so the producer looks again soon instead of at the next poll. The jobs
// were inserted before the worker started, so no notification will come,
// and the poll is an hour: only the retry can start them once claims
// succeed again. Before the retry, a failed claim settled as "nothing
// found" and the queue waited for the poll (TestLimitedKeysPastEmptyOnes
// stalled so in CI when its claims timed out on a loaded machine).
func TestFailedClaimRetried(t *testing.T) {
	both(t, testFailedClaimRetried[pgx.Tx], testFailedClaimRetried[*sql.Tx])
}

func testFailedClaimRetried[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	const queue, total = "retry", 3
	ran := &runLog{}
	workers := keel.NewWorkers()
	keel.AddWorker(workers, idWorker{ran})
	ins := startClient(t, d, &keel.Config{})
	var params []keel.InsertParams
	for range total {
		params = append(params, keel.InsertParams{Args: countArgs{}, Opts: &keel.InsertOpts{Queue: queue}})
	}
	if _, err := ins.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	fd := &failingClaims[TTx]{Driver: d}
	fd.failing.Store(true)
	cfg := fastConfig(workers)
	cfg.FetchPollInterval = time.Hour
	cfg.Queues = map[string]keel.QueueConfig{queue: {MaxWorkers: 2}}
	startClient[TTx](t, fd, cfg)
	waitFor(t, 30*time.Second, "claims to fail", func() bool { return fd.failed.Load() >= 2 })
	fd.failing.Store(false)
	waitFor(t, 30*time.Second, "the jobs to start once claims succeed again", func() bool { return ran.jobs() == total })
}

// failingClaims is a driver whose claims fail while failing is set, the
// way a claim fails when its statement outlives its deadline.
type failingClaims[TTx any] struct {
	keeldriver.Driver[TTx]
	failing atomic.Bool
	failed  atomic.Int64
}

func (f *failingClaims[TTx]) Executor() keeldriver.Executor {
	return failingExec{Executor: f.Driver.Executor(), f: &f.failing, n: &f.failed}
}

type failingExec struct {
	keeldriver.Executor
	f *atomic.Bool
	n *atomic.Int64
}

func (e failingExec) JobClaimKeys(ctx context.Context, p *keeldriver.JobClaimKeysParams) ([]*keeltype.JobRow, error) {
	if e.f.Load() {
		e.n.Add(1)
		return nil, errors.New("claim statement timed out (test)")
	}
	return e.Executor.JobClaimKeys(ctx, p)
}
