package keeldrivertest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// testTransactions: Executor.Begin is a real transaction (a savepoint when
// nested), UnwrapTx gives its native transaction, Rollback after Commit is
// safe.
func testTransactions(t *testing.T, e *env) {
	ctx := context.Background()
	btx, err := e.ex.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer btx.Rollback(ctx)
	kept := insert(t, btx, job("q"))[0].ID
	if _, err := e.ex.JobGet(ctx, kept); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("uncommitted job visible outside the transaction: %v", err)
	}
	inner, err := btx.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	released := insert(t, inner, job("inner"))[0].ID
	if err := inner.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	sp, err := btx.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dropped := insert(t, sp, job("sp"))[0].ID
	if err := sp.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := btx.JobGet(ctx, dropped); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("rolled-back savepoint kept its job: %v", err)
	}
	// The native transaction behind btx, wrapped again, is the same one.
	native, ok := e.rewrap(btx)
	if !ok {
		t.Fatal("UnwrapTx of a transaction from Begin gave nothing")
	}
	viaNative := insert(t, native, job("native"))[0].ID
	if _, err := btx.JobGet(ctx, viaNative); err != nil {
		t.Fatalf("write through the unwrapped transaction not in it: %v", err)
	}
	if err := btx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := btx.Rollback(ctx); err != nil {
		t.Fatalf("rollback after commit: %v", err)
	}
	for _, id := range []int64{kept, released, viaNative} {
		get(t, e.ex, id)
	}
	expectNoJobs(t, e.ex, "sp")

	// Rolled back: nothing stays, claims included.
	avail := insert(t, e.ex, job("r"))[0]
	rtx, err := e.ex.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gone := insert(t, rtx, job("q"))[0].ID
	if got := claim(t, rtx, "r", "w", 1, nil); len(got) != 1 {
		t.Fatalf("claim in transaction: %v", ids(got))
	}
	if err := rtx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ex.JobGet(ctx, gone); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("rolled-back insert visible: %v", err)
	}
	if j := get(t, e.ex, avail.ID); j.State != keeltype.JobStateAvailable || j.Fence != 0 {
		t.Fatalf("rolled-back claim kept: %+v", j)
	}
}

// testCallerTransaction: UnwrapExecutor runs engine statements in the
// caller's transaction; Commit and Rollback on it are no-ops; savepoints
// inside it work; the caller's commit or rollback decides.
func testCallerTransaction(t *testing.T, e *env) {
	ctx := context.Background()
	ct, err := e.callerTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !ct.unwrapped {
		t.Fatal("UnwrapTx did not return the caller's transaction")
	}
	ex := ct.ex
	kept := insert(t, ex, job("q"))[0].ID
	if _, err := ex.JobGet(ctx, kept); err != nil {
		t.Fatalf("own write invisible in the transaction: %v", err)
	}
	if _, err := e.ex.JobGet(ctx, kept); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("uncommitted job visible outside the transaction: %v", err)
	}
	sp, err := ex.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dropped := insert(t, sp, job("sp"))[0].ID
	if err := sp.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.JobGet(ctx, dropped); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("savepoint rollback kept its job: %v", err)
	}
	sp2, err := ex.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	released := insert(t, sp2, job("sp2"))[0].ID
	if err := sp2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// No-ops: the caller owns the transaction.
	if err := ex.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ex.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.JobGet(ctx, kept); err != nil {
		t.Fatalf("wrapper's Rollback ended the caller's transaction: %v", err)
	}
	if _, err := e.ex.JobGet(ctx, kept); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("wrapper's Commit committed the caller's transaction: %v", err)
	}
	if err := ct.end(ctx, true); err != nil {
		t.Fatal(err)
	}
	get(t, e.ex, kept)
	get(t, e.ex, released)
	expectNoJobs(t, e.ex, "sp")

	// The caller rolls back: the engine's writes go with it.
	ct, err = e.callerTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gone := insert(t, ct.ex, job("q"))[0].ID
	if err := ct.end(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ex.JobGet(ctx, gone); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("caller's rollback kept the job: %v", err)
	}
}

// testListenNotify: every listener of a topic gets each notification, with
// its topic and payload; other topics and unlistened ones get nothing.
func testListenNotify(t *testing.T, e *env) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l1, l2, deaf := listen(t, e.d, "jobs"), listen(t, e.d, "jobs"), listen(t, e.d, "other")
	if err := e.d.Notify(ctx, "jobs", "q1"); err != nil {
		t.Fatal(err)
	}
	for _, l := range []keeldriver.Listener{l1, l2} {
		n, err := l.WaitForNotification(ctx)
		if err != nil || n.Topic != "jobs" || n.Payload != "q1" {
			t.Fatalf("notification: %+v %v", n, err)
		}
	}
	expectSilence(t, deaf)
	if err := l2.Unlisten(ctx, "jobs"); err != nil {
		t.Fatal(err)
	}
	if err := e.d.Notify(ctx, "jobs", "q2"); err != nil {
		t.Fatal(err)
	}
	if n, err := l1.WaitForNotification(ctx); err != nil || n.Payload != "q2" {
		t.Fatalf("second notification: %+v %v", n, err)
	}
	expectSilence(t, l2)
}

// testInsertNotifier: a driver that implements keeldriver.InsertNotifier
// inserts like JobInsertMany and notifies each queue on commit, never
// before and never after a rollback.
func testInsertNotifier(t *testing.T, e *env) {
	if _, ok := e.ex.(keeldriver.InsertNotifier); !ok {
		t.Skip("the driver does not implement keeldriver.InsertNotifier")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := listen(t, e.d, "job_insert")
	insertNotify := func(ex keeldriver.Executor, params ...*keeldriver.JobInsertParams) []keeldriver.JobInsertResult {
		t.Helper()
		n, ok := ex.(keeldriver.InsertNotifier)
		if !ok {
			t.Fatalf("%T does not implement keeldriver.InsertNotifier", ex)
		}
		res, err := n.JobInsertManyNotify(ctx, params, "job_insert", []string{"q", "r"})
		if err != nil || len(res) != len(params) {
			t.Fatalf("insert and notify: %v %v", res, err)
		}
		return res
	}
	expectQueues := func() {
		t.Helper()
		var got []string
		for range 2 {
			n, err := l.WaitForNotification(ctx)
			if err != nil {
				t.Fatalf("notification: %v", err)
			}
			if n.Topic != "job_insert" {
				t.Fatalf("notification on %q", n.Topic)
			}
			got = append(got, n.Payload)
		}
		if slices.Sort(got); !slices.Equal(got, []string{"q", "r"}) {
			t.Fatalf("notified %q, want q and r", got)
		}
	}

	// On the pool: one round trip, notified at once.
	a := job("q")
	a.IdempotencyKey = "once"
	res := insertNotify(e.ex, a, job("r"))
	if res[0].Duplicate || res[1].Duplicate || res[0].Job.Queue != "q" || res[1].Job.Queue != "r" {
		t.Fatalf("results: %+v", res)
	}
	expectQueues()

	// In a transaction: notified on commit, not before.
	tx, err := e.ex.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	res = insertNotify(tx, a, job("r"))
	if !res[0].Duplicate || res[1].Duplicate {
		t.Fatalf("results in transaction: %+v", res)
	}
	expectSilence(t, l)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	expectQueues()
	get(t, e.ex, res[1].Job.ID)

	// Rolled back: no notification, no job.
	tx, err = e.ex.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res = insertNotify(tx, job("q"))
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	expectSilence(t, l)
	if _, err := e.ex.JobGet(ctx, res[0].Job.ID); !errors.Is(err, keeltype.ErrNotFound) {
		t.Fatalf("rolled-back insert visible: %v", err)
	}
}

// expectNoJobs fails if queue has jobs. Rolled-back inserts are checked by
// queue once later inserts may have reused their ids.
func expectNoJobs(t *testing.T, ex keeldriver.Executor, queue string) {
	t.Helper()
	list, err := ex.JobList(context.Background(), &keeldriver.JobListParams{Queues: []string{queue}})
	if err != nil || len(list) != 0 {
		t.Fatalf("rolled-back jobs of queue %s committed: %v %v", queue, ids(list), err)
	}
}

// listen returns a connected listener on topic, closed when t ends.
func listen(t *testing.T, d driver, topic string) keeldriver.Listener {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := d.Listener()
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	if err := l.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(ctx, topic); err != nil {
		t.Fatal(err)
	}
	return l
}

// expectSilence fails if l receives a notification within 200ms: long
// enough for a local notification that was sent to arrive.
func expectSilence(t *testing.T, l keeldriver.Listener) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if n, err := l.WaitForNotification(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expected no notification, got %+v %v", n, err)
	}
}
