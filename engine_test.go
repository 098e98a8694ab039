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

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

func TestInsertIdempotent(t *testing.T) {
	both(t, testInsertIdempotent[pgx.Tx], testInsertIdempotent[*sql.Tx])
}

func testInsertIdempotent[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	c := startClient(t, d, &keel.Config{})
	first, err := c.Insert(ctx, noopArgs{N: 1}, &keel.InsertOpts{IdempotencyKey: "order-7:charge"})
	if err != nil || first.Duplicate {
		t.Fatalf("first insert: %v dup=%v", err, first.Duplicate)
	}
	again, err := c.Insert(ctx, noopArgs{N: 2}, &keel.InsertOpts{IdempotencyKey: "order-7:charge"})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.Job.ID != first.Job.ID || string(again.Job.Args) != string(first.Job.Args) {
		t.Fatalf("repeat insert must return the original untouched: %+v", again)
	}
	if _, err := c.Insert(ctx, noopArgs{}, &keel.InsertOpts{Priority: 9}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("priority 9 must be refused, got %v", err)
	}
}

func TestInsertTxRollback(t *testing.T) {
	both(t, testInsertTxRollback[pgx.Tx], testInsertTxRollback[*sql.Tx])
}

func testInsertTxRollback[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	c := startClient(t, d, &keel.Config{})
	etx, err := d.Executor().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.InsertTx(ctx, d.UnwrapTx(etx), noopArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := etx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JobGet(ctx, res.Job.ID); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("rolled-back insert left a job: %v", err)
	}
}

type outcomeArgs struct {
	Mode string `json:"mode"`
}

func (outcomeArgs) Kind() string { return "test.outcome" }

// outcomeWorker returns the outcome its args name, counting Work and Check
// calls, so tests can see which path ran.
type outcomeWorker struct {
	works, checks atomic.Int32
	check         keel.CheckDecision
}

func (w *outcomeWorker) Work(ctx context.Context, job *keel.Job[outcomeArgs]) error {
	n := w.works.Add(1)
	switch job.Args.Mode {
	case "permanent":
		return keel.JobPermanent(errors.New("card declined"))
	case "unknown-once":
		if n == 1 {
			return keel.JobUnknown(errors.New("gateway timeout after send"))
		}
	case "snooze-twice":
		if n <= 2 {
			return keel.JobSnooze(time.Millisecond)
		}
	case "fail-twice":
		if n <= 2 {
			return errors.New("connection reset")
		}
	case "always-fail":
		return errors.New("still broken")
	}
	return keel.RecordResult(ctx, map[string]int32{"works": n})
}

func (w *outcomeWorker) Check(ctx context.Context, job *keel.Job[outcomeArgs]) (keel.CheckResult, error) {
	w.checks.Add(1)
	return keel.CheckResult{Decision: w.check, Result: "confirmed by query", Reason: "counterpart cannot say"}, nil
}

var outcomeQueues atomic.Int32

// runOutcome works one job on a queue of its own, so clients left running
// by earlier calls in the same test cannot take it.
func runOutcome[TTx any](t *testing.T, d keeldriver.Driver[TTx], w *outcomeWorker, mode string, maxAttempts int) *keeltype.JobRow {
	t.Helper()
	ws := keel.NewWorkers()
	keel.AddWorker[outcomeArgs](ws, w)
	queue := fmt.Sprintf("outcome-%d", outcomeQueues.Add(1))
	cfg := fastConfig(ws)
	cfg.Queues = map[string]keel.QueueConfig{queue: {MaxWorkers: 10}}
	c := startClient(t, d, cfg)
	res, err := c.Insert(context.Background(), outcomeArgs{Mode: mode}, &keel.InsertOpts{MaxAttempts: maxAttempts, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	var row *keeltype.JobRow
	waitFor(t, 10*time.Second, "a final or manual state", func() bool {
		row = jobState(t, c, res.Job.ID)
		return row.State.Final() || row.State == keeltype.JobStateManual
	})
	return row
}

func TestPermanentErrorGoesToManual(t *testing.T) {
	both(t, testPermanentErrorGoesToManual[pgx.Tx], testPermanentErrorGoesToManual[*sql.Tx])
}

func testPermanentErrorGoesToManual[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	row := runOutcome(t, d, &outcomeWorker{}, "permanent", 5)
	if row.State != keeltype.JobStateManual || len(row.Errors) != 1 || row.Errors[0].Class != keeltype.ErrorClassPermanent {
		t.Fatalf("want manual with one permanent error, got %s %+v", row.State, row.Errors)
	}
	if row.Errors[0].Message == "" || row.Errors[0].Attempt != 1 || row.Errors[0].Fence != 1 {
		t.Fatalf("error history incomplete: %+v", row.Errors[0])
	}
}

func TestRetryThenBudgetExhausted(t *testing.T) {
	both(t, testRetryThenBudgetExhausted[pgx.Tx], testRetryThenBudgetExhausted[*sql.Tx])
}

func testRetryThenBudgetExhausted[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	row := runOutcome(t, d, &outcomeWorker{}, "fail-twice", 5)
	if row.State != keeltype.JobStateCompleted || row.Attempt != 3 || len(row.Errors) != 2 {
		t.Fatalf("want completed on attempt 3 after 2 errors, got %s attempt=%d errors=%d", row.State, row.Attempt, len(row.Errors))
	}
	row = runOutcome(t, d, &outcomeWorker{}, "always-fail", 3)
	if row.State != keeltype.JobStateManual || row.Attempt != 3 || len(row.Errors) != 3 {
		t.Fatalf("want manual after 3 attempts, got %s attempt=%d errors=%d", row.State, row.Attempt, len(row.Errors))
	}
}

func TestSnoozeDoesNotConsumeAttempts(t *testing.T) {
	both(t, testSnoozeDoesNotConsumeAttempts[pgx.Tx], testSnoozeDoesNotConsumeAttempts[*sql.Tx])
}

func testSnoozeDoesNotConsumeAttempts[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	w := &outcomeWorker{}
	row := runOutcome(t, d, w, "snooze-twice", 1)
	if row.State != keeltype.JobStateCompleted || row.Attempt != 1 || len(row.Errors) != 0 || w.works.Load() != 3 {
		t.Fatalf("want completed at attempt 1 with 3 runs and no errors, got %s attempt=%d errors=%d runs=%d",
			row.State, row.Attempt, len(row.Errors), w.works.Load())
	}
}

func TestUnknownIsCheckedBeforeRetry(t *testing.T) {
	both(t, testUnknownIsCheckedBeforeRetry[pgx.Tx], testUnknownIsCheckedBeforeRetry[*sql.Tx])
}

func testUnknownIsCheckedBeforeRetry[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	cases := []struct {
		decision   keel.CheckDecision
		want       keeltype.JobState
		wantWorks  int32
		wantResult string
	}{
		{keel.CheckCompleted, keeltype.JobStateCompleted, 1, `"confirmed by query"`},
		{keel.CheckRetry, keeltype.JobStateCompleted, 2, `{"works": 2}`},
		{keel.CheckManual, keeltype.JobStateManual, 1, ""},
	}
	for _, tc := range cases {
		w := &outcomeWorker{check: tc.decision}
		row := runOutcome(t, d, w, "unknown-once", 5)
		if row.State != tc.want || w.works.Load() != tc.wantWorks || w.checks.Load() != 1 {
			t.Fatalf("decision %d: want %s with %d works and 1 check, got %s works=%d checks=%d",
				tc.decision, tc.want, tc.wantWorks, row.State, w.works.Load(), w.checks.Load())
		}
		if tc.wantResult != "" && !jsonEqual(row.Result, tc.wantResult) {
			t.Fatalf("decision %d: result %s, want %s", tc.decision, row.Result, tc.wantResult)
		}
		if row.Errors[0].Class != keeltype.ErrorClassUnknown {
			t.Fatalf("first error must be classed unknown: %+v", row.Errors)
		}
	}
}

func TestUnknownWithoutCheckerGoesToManual(t *testing.T) {
	both(t, testUnknownWithoutChecker[pgx.Tx], testUnknownWithoutChecker[*sql.Tx])
}

type plainArgs struct{}

func (plainArgs) Kind() string { return "test.plain-unknown" }

func testUnknownWithoutChecker[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	var works atomic.Int32
	ws := keel.NewWorkers()
	keel.AddWorker(ws, keel.WorkerFunc[plainArgs](func(ctx context.Context, job *keel.Job[plainArgs]) error {
		works.Add(1)
		return keel.JobUnknown(errors.New("timeout after send"))
	}))
	c := startClient(t, d, fastConfig(ws))
	res, err := c.Insert(context.Background(), plainArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	row := waitState(t, c, res.Job.ID, keeltype.JobStateManual)
	if works.Load() != 1 || row.Errors[0].Class != keeltype.ErrorClassUnknown {
		t.Fatalf("an unknown result with no way to check must not be retried blindly: works=%d %+v", works.Load(), row.Errors)
	}
}
