package reservation

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsql/sqlfile"
	"github.com/keelwork/keel/module/moduletest"
)

var chaosSQL = sqlfile.MustLoad(os.DirFS("testdata"), ".")

// errInventory is the injected inventory-restore failure.
var errInventory = errors.New("inventory service timed out")

func TestChaosDroppedConnectionAndFailedRestore(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		e := newPGEnv(t)
		var kills atomic.Int32
		var txs atomic.Int32
		// Drop the connection of the third release transaction after its
		// release statement, before it commits.
		kill := func(ctx context.Context, stage string, q keelsql.Querier) error {
			if stage != "released" || txs.Add(1) != 3 {
				return nil
			}
			var pid int
			if err := q.QueryRow(ctx, chaosSQL.Get("BackendPID")).Scan(&pid); err != nil {
				return err
			}
			conn, err := pgx.Connect(ctx, testdb.PostgresURL(t))
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			var ok bool
			if err := conn.QueryRow(ctx, chaosSQL.Get("Terminate"), pid).Scan(&ok); err != nil || !ok {
				t.Errorf("terminating backend %d: %v %v", pid, ok, err)
			}
			kills.Add(1)
			return nil
		}
		testChaos(t, e, kill)
		if kills.Load() != 1 {
			t.Fatalf("the connection was dropped %d times, want 1", kills.Load())
		}
	})
	if moduletest.SQLiteLeftApart(t) {
		return
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		testChaos(t, newSQLiteEnv(t), nil)
	})
}

// testChaos releases 400 due reservations while inventory restores of one
// in seven fail (and, on PostgreSQL, a batch's connection drops): nothing is
// released without its place returned, the failures are marked for
// compensation, and after the compensation run everything converged.
func testChaos[TTx any](t *testing.T, e *env[TTx], kill func(context.Context, string, keelsql.Querier) error) {
	ctx := context.Background()
	const due = 400
	var failing atomic.Bool
	failing.Store(true)
	restore := func(ctx context.Context, c Candidate) error {
		if failing.Load() && c.ID%7 == 0 {
			return errInventory
		}
		return nil
	}
	opts := []Option{WithRestoreHook(restore)}
	if kill != nil {
		opts = append(opts, withStageHook(kill))
	}
	m := e.module(t, opts...)
	if err := m.benchLoad(ctx, due, due); err != nil {
		t.Fatal(err)
	}
	released, failed := 0, 0
	for {
		run := mustScan(t, m)
		released += run.Released
		failed += run.Failed
		noDrift(t, m) // after every run: no place lost, none returned twice
		if run.Scanned == 0 {
			break
		}
	}
	failedIDs := due / 7 // ids 1..400 loaded in order: multiples of 7
	if failed != failedIDs || released != due-failedIDs {
		t.Fatalf("scans released %d and failed %d, want %d and %d", released, failed, due-failedIDs, failedIDs)
	}
	list, err := m.Reservations(ctx, ReservationFilter{State: StatePaid, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list {
		if r.RetryCount != 1 || r.LastError == "" || r.ID%7 != 0 {
			t.Fatalf("left paid: %+v", r)
		}
	}
	if got := testutil.ToFloat64(m.met.restore.WithLabelValues("fail")); got < float64(failedIDs) {
		t.Fatalf("restore failures counted: %v", got)
	}
	failing.Store(false)
	run, err := m.Compensate(ctx)
	if err != nil || run.Released != failedIDs || run.Failed != 0 {
		t.Fatalf("compensation: %+v %v", run, err)
	}
	assertAllReleasedOnce(t, m, due)
}

func TestDeadLetterAfterMaxRetries(t *testing.T) {
	runBoth(t, testDeadLetter[pgx.Tx], testDeadLetter[*sql.Tx])
}

// A record whose capacity can never be returned fails the scan, then each
// compensation run, and becomes a dead letter at reservation.max_retries:
// counted, audited, shown by the gauge; an operator requeues it.
func testDeadLetter[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	var failing atomic.Bool
	failing.Store(true)
	restore := func(ctx context.Context, c Candidate) error {
		if failing.Load() {
			return errInventory
		}
		return nil
	}
	m := e.moduleWith(t, e.db, e.driver, map[string]string{"reservation.max_retries": "3"}, WithRestoreHook(restore))
	f := setup(t, m, 1)
	r := paid(t, m, f.slot.ID, "u1")
	e.clock.Set(*r.ExpectedReleaseAt)
	if run := mustScan(t, m); run.Failed != 1 || run.RestoreFailed != 3 {
		t.Fatalf("scan: %+v", run) // three attempts: the first and two in-run retries
	}
	for i, want := range []int{0, 1} {
		run, err := m.Compensate(ctx)
		if err != nil || run.Failed != 1 || run.DeadLettered != want {
			t.Fatalf("compensation %d: %+v %v", i, run, err)
		}
	}
	got := wantState(t, m, r.ID, StatePaid)
	if got.RetryCount != 3 || got.DeadAt == nil || held(t, m, f.slot.ID) != 1 {
		t.Fatalf("dead letter: %+v", got)
	}
	if n, _ := m.DeadLetterCount(ctx); n != 1 || testutil.ToFloat64(m.met.deadLetters) != 1 {
		t.Fatalf("dead letters: %d, gauge %v", n, testutil.ToFloat64(m.met.deadLetters))
	}
	if run, _ := m.Compensate(ctx); run.Scanned != 0 {
		t.Fatalf("compensation touched a dead letter: %+v", run)
	}
	audits := auditActions(t, m, "reservation.dead_letter")
	if len(audits) != 1 {
		t.Fatalf("dead-letter audits: %v", audits)
	}
	failing.Store(false)
	if err := m.RequeueDeadLetter(ctx, r.ID, "inventory service fixed"); err != nil {
		t.Fatalf("requeue: %v", err)
	}
	if err := m.RequeueDeadLetter(ctx, r.ID, "again"); code(err) != "not_dead_letter" {
		t.Fatalf("requeueing twice: %v", err)
	}
	if run := mustScan(t, m); run.Released != 1 {
		t.Fatalf("scan after requeue: %+v", run)
	}
	if n, _ := m.DeadLetterCount(ctx); n != 0 || testutil.ToFloat64(m.met.deadLetters) != 0 {
		t.Fatalf("dead letters after requeue: %d", n)
	}
	noDrift(t, m)
}

// auditActions lists the audit rows of an action (prefix).
func auditActions[TTx any](t testing.TB, m *Module[TTx], action string) []string {
	t.Helper()
	c, err := m.engine()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := c.AuditList(context.Background(), &keel.AuditListParams{Action: action, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.Action+" "+r.Target+" by "+r.Actor+": "+r.Reason)
	}
	return out
}
