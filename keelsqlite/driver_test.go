package keelsqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/keelwork/keel/internal/testwait"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// openTest opens a fresh database in t.TempDir() with the engine migrations
// applied by executing the .up.sql files in order.
func openTest(t testing.TB) *Driver {
	t.Helper()
	d := openFile(t, filepath.Join(t.TempDir(), "keel.db"))
	migrate(t, d)
	return d
}

func openFile(t testing.TB, path string) *Driver {
	t.Helper()
	d, err := Open(path, &Config{ReadConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func migrate(t testing.TB, d *Driver) {
	t.Helper()
	files, err := fs.Glob(d.Migrations(), "*.up.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	sort.Strings(files)
	for _, f := range files {
		src, err := fs.ReadFile(d.Migrations(), f)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Executor().Exec(context.Background(), string(src)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
}

// t0 is in the past: inserts use the real clock, so RunAt before t0 is due.
var t0 = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)

func at(d time.Duration) *time.Time {
	v := t0.Add(d)
	return &v
}

func insert(t *testing.T, d *Driver, params ...*keeldriver.JobInsertParams) []*keeltype.JobRow {
	t.Helper()
	res, err := d.Executor().JobInsertMany(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*keeltype.JobRow, len(res))
	for i, r := range res {
		out[i] = r.Job
	}
	return out
}

// job is an available job of kind "k" in queue q (run_at in the past).
func job(q string) *keeldriver.JobInsertParams {
	return &keeldriver.JobInsertParams{Kind: "k", Queue: q, RunAt: at(-time.Hour)}
}

func claim(t *testing.T, d *Driver, queue, owner string, n int, now *time.Time) []*keeltype.JobRow {
	t.Helper()
	jobs, err := d.Executor().JobClaim(context.Background(), &keeldriver.JobClaimParams{
		Queue: queue, Owner: owner, Max: n, LeaseDuration: time.Minute, Now: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func get(t *testing.T, d *Driver, id int64) *keeltype.JobRow {
	t.Helper()
	j, err := d.Executor().JobGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestFreshFileAndCapabilities: an unmigrated file has an empty catalogue
// (no error), and the driver declares SQLite without a cross-process
// listener. The catalogue on a migrated database is in the conformance
// suite.
func TestFreshFileAndCapabilities(t *testing.T) {
	ctx := context.Background()
	d := openFile(t, filepath.Join(t.TempDir(), "keel.db"))
	ex := d.Executor()
	if got, err := ex.MigrationApplied(ctx); err != nil || len(got) != 0 {
		t.Fatalf("before migrating: %v, %v", got, err)
	}
	if ok, err := ex.TableExists(ctx, "keel_job"); err != nil || ok {
		t.Fatalf("keel_job before migrating: %v %v", ok, err)
	}
	migrate(t, d)
	if ok, err := ex.TableExists(ctx, "keel_job"); err != nil || !ok {
		t.Fatalf("keel_job after migrating: %v %v", ok, err)
	}
	if d.Dialect() != "sqlite" || d.SupportsListener() {
		t.Fatal("dialect/listener capability")
	}
}

// TestNotifyInProcess covers the in-process hub beyond the listener
// contract of the conformance suite: Listen works without Connect, a flood
// beyond the buffer still wakes the listener, and closing a listener or the
// driver wakes waiters with ErrClosed.
func TestNotifyInProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d := openTest(t)
	l1, l2, deaf := d.Listener(), d.Listener(), d.Listener()
	for _, l := range []keeldriver.Listener{l1, l2} {
		if err := l.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Listen(ctx, "jobs"); err != nil {
			t.Fatal(err)
		}
	}
	if err := deaf.Listen(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	// A flood beyond the buffer drops messages but the listener still wakes.
	for i := range 5000 {
		_ = d.Notify(ctx, "jobs", fmt.Sprint(i))
	}
	if n, err := l1.WaitForNotification(ctx); err != nil || n.Payload != "0" {
		t.Fatalf("after flood: %+v %v", n, err)
	}
	// Close wakes a blocked waiter.
	done := make(chan error, 1)
	go func() {
		_ = deaf.Unlisten(ctx, "other")
		_, err := deaf.WaitForNotification(ctx)
		done <- err
	}()
	testwait.For(t, 5*time.Second, "the waiter to block", func() bool { return deaf.(*listener).blocked.Load() == 1 })
	_ = deaf.Close(ctx)
	if err := <-done; !errors.Is(err, keeldriver.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	// Closing the driver wakes listeners even with messages buffered.
	_ = d.Close()
	if _, err := l2.WaitForNotification(ctx); !errors.Is(err, keeldriver.ErrClosed) {
		t.Fatalf("after driver close: %v", err)
	}
}

// TestConcurrentWriters runs inserts, claims, heartbeats and finishes from
// many goroutines on one Driver: they queue for its single write connection,
// so none sees SQLITE_BUSY.
func TestConcurrentWriters(t *testing.T) {
	d := openTest(t)
	const workers = 8
	runChurn(t, []*Driver{d}, workers)
	assertCompleted(t, d, workers*churnRounds*5)
}

// TestTwoDriversOneFile is two processes sharing a file: their writers meet
// in SQLite's lock, where BEGIN IMMEDIATE and busy_timeout make the second
// one wait instead of failing. SQLite's busy handler is not fair, so the load
// is kept to one worker per driver (each waits at most for the other's run).
func TestTwoDriversOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keel.db")
	d1 := openFile(t, path)
	migrate(t, d1)
	d2 := openFile(t, path)
	runChurn(t, []*Driver{d1, d2}, 2)
	assertCompleted(t, d2, 2*churnRounds*5)
}

func runChurn(t *testing.T, drivers []*Driver, workers int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		d := drivers[w%len(drivers)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := churn(d, fmt.Sprintf("w%d", w)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func assertCompleted(t *testing.T, d *Driver, want int64) {
	t.Helper()
	// QueueStats counts live jobs only; completed ones are listed.
	var n, after int64
	for {
		rows, err := d.Executor().JobList(context.Background(), &keeldriver.JobListParams{
			States: []keeltype.JobState{keeltype.JobStateCompleted}, AfterID: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		n += int64(len(rows))
		if len(rows) < 1000 {
			break
		}
		after = rows[len(rows)-1].ID
	}
	if n != want {
		t.Fatalf("completed %d, want %d", n, want)
	}
}

const churnRounds = 10

// churn inserts, claims, heartbeats and completes five jobs per round, then
// drains what other workers left behind so the total is exact.
func churn(d *Driver, owner string) error {
	ctx := context.Background()
	ex := d.Executor()
	for range churnRounds {
		params := make([]*keeldriver.JobInsertParams, 5)
		for i := range params {
			params[i] = &keeldriver.JobInsertParams{Kind: "k", Queue: "q", Args: json.RawMessage(`{"o":"` + owner + `"}`)}
		}
		if _, err := ex.JobInsertMany(ctx, params); err != nil {
			return err
		}
		jobs, err := ex.JobClaim(ctx, &keeldriver.JobClaimParams{Queue: "q", Owner: owner, Max: 5, LeaseDuration: time.Minute})
		if err != nil {
			return err
		}
		var fin []*keeldriver.JobFinishParams
		hb := &keeldriver.JobHeartbeatParams{Owner: owner, LeaseDuration: time.Minute}
		for _, j := range jobs {
			hb.IDs, hb.Fences = append(hb.IDs, j.ID), append(hb.Fences, j.Fence)
			fin = append(fin, &keeldriver.JobFinishParams{ID: j.ID, Fence: j.Fence, State: keeltype.JobStateCompleted})
		}
		if _, err := ex.JobHeartbeat(ctx, hb); err != nil {
			return err
		}
		if _, err := ex.JobFinishMany(ctx, fin); err != nil {
			return err
		}
		if _, err := ex.JobGet(ctx, 1); err != nil && !errors.Is(err, keeltype.ErrNotFound) {
			return err
		}
	}
	for {
		jobs, err := ex.JobClaim(ctx, &keeldriver.JobClaimParams{Queue: "q", Owner: owner, Max: 50, LeaseDuration: time.Minute})
		if err != nil || len(jobs) == 0 {
			return err
		}
		var fin []*keeldriver.JobFinishParams
		for _, j := range jobs {
			fin = append(fin, &keeldriver.JobFinishParams{ID: j.ID, Fence: j.Fence, State: keeltype.JobStateCompleted})
		}
		if _, err := ex.JobFinishMany(ctx, fin); err != nil {
			return err
		}
	}
}

func TestOpenRejectsMemory(t *testing.T) {
	if _, err := Open(":memory:", nil); err == nil {
		t.Fatal("expected an error")
	}
}

func TestNewWithCallerDB(t *testing.T) {
	ctx := context.Background()
	owner := openTest(t)
	d, err := New(owner.DB(), nil)
	if err != nil {
		t.Fatal(err)
	}
	insert(t, d, job("q"))
	if got := claim(t, d, "q", "w", 1, nil); len(got) != 1 {
		t.Fatal("claim through New")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// The caller's DB is still open.
	if _, err := owner.Executor().JobGet(ctx, 1); err != nil {
		t.Fatal(err)
	}
}
