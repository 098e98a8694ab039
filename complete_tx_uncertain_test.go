package keel_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

type uncertainArgs struct{}

func (uncertainArgs) Kind() string { return "test.uncertain" }

// The worker's CompleteTx transaction loses its backend before COMMIT (the
// connection is terminated from another session): the commit fails with an
// outcome the worker cannot know. The job must be claimable again at once,
// not after the five-minute lease, and must then complete on the next attempt.
// PostgreSQL only: it needs a server backend to terminate.
func TestCompleteTxCommitLostHandsJobBack(t *testing.T) {
	t.Parallel()
	d := testdb.NewPostgres(t)
	ctx := context.Background()
	var runs atomic.Int32
	commitErr := make(chan error, 1)
	ws := keel.NewWorkers()
	keel.AddWorker(ws, keel.WorkerFunc[uncertainArgs](func(ctx context.Context, job *keel.Job[uncertainArgs]) error {
		client, err := keel.ClientFromContext[pgx.Tx](ctx)
		if err != nil {
			return err
		}
		tx, err := d.Pool().Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		if err := client.CompleteTx(ctx, tx, job, fmt.Sprintf("attempt %d", job.Attempt)); err != nil {
			return err
		}
		if runs.Add(1) == 1 {
			// Kill this transaction's backend and wait until it is gone.
			pid := tx.Conn().PgConn().PID()
			if _, err := d.Pool().Exec(ctx, `select pg_terminate_backend($1, 5000)`, pid); err != nil {
				return err
			}
			err := tx.Commit(ctx)
			commitErr <- err
			if err == nil {
				return errors.New("commit after terminate unexpectedly succeeded")
			}
			return fmt.Errorf("committing the business write: %w", err)
		}
		return tx.Commit(ctx)
	}))
	cfg := fastConfig(ws)
	cfg.LeaseDuration = 5 * time.Minute
	c := startClient(t, d, cfg)
	res, err := c.Insert(ctx, uncertainArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-commitErr; err == nil {
		t.Fatal("the terminated transaction's commit must fail")
	}
	var row *keeltype.JobRow
	waitFor(t, 5*time.Second, "the job to be completed by a second attempt", func() bool {
		row = jobState(t, c, res.Job.ID)
		return row.State == keeltype.JobStateCompleted
	})
	if row.Fence != 2 || runs.Load() != 2 || !jsonEqual(row.Result, `"attempt 2"`) {
		t.Fatalf("want completion by the second claim, got fence=%d runs=%d result=%s", row.Fence, runs.Load(), row.Result)
	}
	if len(row.Errors) != 1 || row.Errors[0].Class != keeltype.ErrorClassUnknown {
		t.Fatalf("the uncertain commit must be recorded as one unknown attempt error, got %+v", row.Errors)
	}
	if got := testutil.ToFloat64(c.Metrics().CommitUncertain.WithLabelValues("test.uncertain", "handed_back")); got != 1 {
		t.Fatalf("handed-back uncertain commits counted %v, want 1", got)
	}
	// The worker's own commit makes the row completed; the engine counts
	// the completion once the handler has returned, a moment later.
	completed := c.Metrics().Completed.WithLabelValues(keel.DefaultQueue, "test.uncertain")
	waitFor(t, 5*time.Second, "the completion to be counted", func() bool { return testutil.ToFloat64(completed) >= 1 })
	if got := testutil.ToFloat64(completed); got != 1 {
		t.Fatalf("completions counted %v, want 1", got)
	}
}

// The commit landed but the worker saw an error for it (the reply was lost
// with the connection; here the worker reports it after a successful commit,
// which is what the engine sees in that case). The fenced check must find
// the job completed at this fence and count it once, without a second run.
func TestCompleteTxCommittedReplyLostReportsCompleted(t *testing.T) {
	t.Parallel()
	d := testdb.NewPostgres(t)
	ctx := context.Background()
	var runs atomic.Int32
	ws := keel.NewWorkers()
	keel.AddWorker(ws, keel.WorkerFunc[uncertainArgs](func(ctx context.Context, job *keel.Job[uncertainArgs]) error {
		runs.Add(1)
		client, err := keel.ClientFromContext[pgx.Tx](ctx)
		if err != nil {
			return err
		}
		tx, err := d.Pool().Begin(ctx)
		if err != nil {
			return err
		}
		if err := client.CompleteTx(ctx, tx, job, "done"); err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		return errors.New("committing the business write: unexpected EOF")
	}))
	cfg := fastConfig(ws)
	cfg.LeaseDuration = 5 * time.Minute
	c := startClient(t, d, cfg)
	res, err := c.Insert(ctx, uncertainArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := c.Metrics().CommitUncertain.WithLabelValues("test.uncertain", "committed")
	waitFor(t, 5*time.Second, "the uncertain commit to be settled as committed", func() bool {
		return testutil.ToFloat64(found) == 1
	})
	row := jobState(t, c, res.Job.ID)
	if row.State != keeltype.JobStateCompleted || row.Fence != 1 || !jsonEqual(row.Result, `"done"`) || len(row.Errors) != 0 {
		t.Fatalf("want completed once at fence 1, got %s fence=%d result=%s errors=%+v", row.State, row.Fence, row.Result, row.Errors)
	}
	if got := testutil.ToFloat64(c.Metrics().Completed.WithLabelValues(keel.DefaultQueue, "test.uncertain")); got != 1 || runs.Load() != 1 {
		t.Fatalf("completions counted %v, runs %d; want 1 and 1", got, runs.Load())
	}
	if got := testutil.ToFloat64(c.Metrics().CommitUncertain.WithLabelValues("test.uncertain", "handed_back")); got != 0 {
		t.Fatalf("a committed job was handed back %v times", got)
	}
}

// A worker that completes in its transaction, rolls it back and returns an
// error is settled at once too (the transaction certainly did not commit),
// and once its attempt budget is spent it goes to an operator instead of
// being handed back without end. On both drivers.
func TestCompleteTxFailedWorkerSettledWithinBudget(t *testing.T) {
	both(t, testCompleteTxFailedWorkerSettled[pgx.Tx], testCompleteTxFailedWorkerSettled[*sql.Tx])
}

func testCompleteTxFailedWorkerSettled[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	var runs atomic.Int32
	ws := keel.NewWorkers()
	keel.AddWorker(ws, keel.WorkerFunc[uncertainArgs](func(ctx context.Context, job *keel.Job[uncertainArgs]) error {
		runs.Add(1)
		client, err := keel.ClientFromContext[TTx](ctx)
		if err != nil {
			return err
		}
		etx, err := d.Executor().Begin(ctx)
		if err != nil {
			return err
		}
		if err := client.CompleteTx(ctx, d.UnwrapTx(etx), job, "never committed"); err != nil {
			_ = etx.Rollback(ctx)
			return err
		}
		_ = etx.Rollback(ctx)
		return errors.New("the business write failed after CompleteTx")
	}))
	cfg := fastConfig(ws)
	cfg.LeaseDuration = 5 * time.Minute
	c := startClient(t, d, cfg)
	res, err := c.Insert(ctx, uncertainArgs{}, &keel.InsertOpts{MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	var row *keeltype.JobRow
	waitFor(t, 5*time.Second, "the job to reach an operator after two attempts", func() bool {
		row = jobState(t, c, res.Job.ID)
		return row.State == keeltype.JobStateManual
	})
	if runs.Load() != 2 || row.Attempt != 2 || len(row.Errors) != 2 || row.Result != nil {
		t.Fatalf("want two runs, two recorded errors and no result, got runs=%d attempt=%d errors=%d result=%s",
			runs.Load(), row.Attempt, len(row.Errors), row.Result)
	}
}
