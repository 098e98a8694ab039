package export

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/csv"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"gocloud.dev/blob"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsqlite"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
)

const crashShards = 60

// crashRows is the 1,200,000 rows on both databases (60 shards).
// Under the race detector a tenth, on PostgreSQL only (120,000, still 60
// shards): the detector instruments modernc's SQLite so heavily that its
// half would measure the instrumentation; both full sizes run without it
// in a step of their own in make test.
func crashRows(dialect string) int {
	n := 1_200_000
	if raceOn {
		n /= 10
	}
	return n
}

func crashSettings(dialect, dir string) map[string]string {
	shard := strconv.Itoa(crashRows(dialect) / crashShards)
	chunk := strconv.Itoa(crashRows(dialect) / crashShards / 4)
	return map[string]string{"export.storage": "file", "export.dir": dir, "export.shard_rows": shard,
		"export.chunk_rows": chunk, "export.batch_rows": "1000", "export.memory_budget_mb": "96", "export.task_peak_mb": "24"}
}

// TestExportCrash: three worker processes export 1,200,000 rows in 60
// shards while the test SIGKILLs and restarts them; at the end there is
// one current file, verified, whose rows and digest equal the cut's, as
// computed here independently from the source table. On PostgreSQL the
// processes share the database over the network; on SQLite they share the
// database file (fewer rows: crashRows).
func TestExportCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("1,200,000 rows and three processes")
	}
	if raceOn {
		// See race_on_test.go: make test runs the SQLite half at full size
		// in its step without -race.
		t.Logf("sqlite subtest: run without -race (go test -run '%s/^sqlite$')", t.Name())
		t.Parallel()
		t.Run("postgres", func(t *testing.T) { testCrash(t, newTenv(moduletest.Postgres(t, testLines))) })
		return
	}
	each(t, testCrash[pgx.Tx], testCrash[*sql.Tx])
}

func testCrash[TTx any](t *testing.T, e *tenv[TTx]) {
	dir := t.TempDir()
	m := e.build(t, crashSettings(e.Name, dir))
	seed(t, m, "crash", crashRows(e.Name), alice)
	// The controller only creates and watches: an insert-only client.
	c := e.Client(t, &keel.Config{Logger: quiet()})
	if err := m.Start(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	task, err := m.Create(as(alice), Request{Tenant: "crash"})
	if err != nil {
		t.Fatal(err)
	}
	if task.ShardCount != crashShards {
		t.Fatalf("%d shards, want %d", task.ShardCount, crashShards)
	}
	procs := make([]*exec.Cmd, 3)
	spawn := func(i int) {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestExportCrashWorker$", "-test.timeout", "20m")
		cmd.Env = append(os.Environ(), "KEEL_EXPORT_CRASH_DSN="+e.DSN, "KEEL_EXPORT_CRASH_DIALECT="+e.Name, "KEEL_EXPORT_CRASH_DIR="+dir, fmt.Sprintf("KEEL_EXPORT_CRASH_ID=w%d-%d", i, time.Now().UnixNano()))
		cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i] = cmd
	}
	for i := range procs {
		spawn(i)
	}
	t.Cleanup(func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	})
	kills := 0
	deadline := time.Now().Add(15 * time.Minute)
	for kills < 8 && time.Now().Before(deadline) {
		// Chaos timing, not a wait for a condition: a kill lands at a
		// random point of some shard's stream or commit. The intervals are
		// short because the export is fast (120,000 rows under the race
		// detector take a few seconds): at least three kills must land
		// while it runs, and at most eight are made, so it still finishes.
		time.Sleep(time.Duration(200+rand.IntN(600)) * time.Millisecond)
		tk, err := m.Task(context.Background(), task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if tk.State != StateRunning {
			break
		}
		i := rand.IntN(len(procs))
		_ = procs[i].Process.Signal(syscall.SIGKILL)
		_ = procs[i].Wait()
		kills++
		spawn(i)
	}
	done := waitState(t, m, task.ID, 15*time.Minute, StateSucceeded)
	t.Logf("%d SIGKILLs; verdict %s", kills, done.VerdictDetail)
	if kills < 3 {
		t.Fatalf("only %d kills landed before the export finished", kills)
	}
	if done.Verdict != "ok" || done.ObjectRows != int64(crashRows(e.Name)) {
		t.Fatalf("verdict %s rows %d", done.Verdict, done.ObjectRows)
	}
	// One current file: the published key is the task's only final object.
	it := m.Bucket().List(&blob.ListOptions{Prefix: fmt.Sprintf("exports/t%d/", task.ID)})
	var finals []string
	for {
		o, err := it.Next(context.Background())
		if err != nil {
			break
		}
		finals = append(finals, o.Key)
	}
	if len(finals) != 1 || finals[0] != done.ObjectKey {
		t.Fatalf("final objects %v, published %s", finals, done.ObjectKey)
	}
	// The cut's file computed here, independently, from the source table.
	h := sha256.New()
	bw := bufio.NewWriter(h)
	cw := csv.NewWriter(bw)
	_ = cw.Write(Columns)
	rows, err := m.DB.Query(context.Background(), "SELECT id, order_no, customer, amount_minor, currency, status, created_at FROM export_orders WHERE tenant = 'crash' AND valid_from <= "+m.ph(1)+" AND (valid_to IS NULL OR valid_to > "+m.ph(1)+") ORDER BY id", task.DataVersion)
	if err != nil {
		t.Fatal(err)
	}
	rec := make([]string, len(Columns))
	n := 0
	for rows.Next() {
		var o orderRow
		if err := rows.Scan(&o.id, &o.orderNo, &o.customer, &o.amount, &o.currency, &o.status, &o.createdAt); err != nil {
			t.Fatal(err)
		}
		o.record(Columns, rec)
		_ = cw.Write(rec)
		n++
	}
	rows.Close()
	cw.Flush()
	_ = bw.Flush()
	if n != crashRows(e.Name) || hex.EncodeToString(h.Sum(nil)) != done.ObjectSHA256 {
		t.Fatalf("the cut has %d rows and digest %x; the file %s", n, h.Sum(nil), done.ObjectSHA256)
	}
	var stale int64
	_ = m.DB.QueryRow(context.Background(), "SELECT coalesce(sum(stale_refused), 0) FROM export_shards WHERE task_id = "+m.ph(1), task.ID).Scan(&stale)
	t.Logf("stale commits refused: %d", stale)
}

// TestExportCrashWorker is the worker process of TestExportCrash (it
// runs only when started by it).
func TestExportCrashWorker(t *testing.T) {
	dsn := os.Getenv("KEEL_EXPORT_CRASH_DSN")
	if dsn == "" {
		t.Skip("started by TestExportCrash only")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if os.Getenv("KEEL_EXPORT_CRASH_DIALECT") == "sqlite" {
		d, err := keelsqlite.Open(dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		crashWorker(ctx, t, d, keelsql.SQLite(d.DB()))
		return
	}
	pool, err := pgxpool.New(ctx, dsn+poolSuffix(dsn))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	d, err := keelpgx.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	crashWorker(ctx, t, d, keelsql.Pgx(pool))
}

// crashWorker runs the module on one database until ctx ends (or the
// process is killed).
func crashWorker[TTx any](ctx context.Context, t *testing.T, d keeldriver.Driver[TTx], db keelsql.DB[TTx]) {
	h := &module.Host[TTx]{DB: db, Logger: quiet(), Settings: crashSettings(d.Dialect(), os.Getenv("KEEL_EXPORT_CRASH_DIR"))}
	m, err := New(h, WithOwner(os.Getenv("KEEL_EXPORT_CRASH_ID")))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &keel.Config{ID: os.Getenv("KEEL_EXPORT_CRASH_ID"), Logger: quiet(), LeaseDuration: 2 * time.Second,
		FetchPollInterval: 100 * time.Millisecond, RescueInterval: 200 * time.Millisecond, LeaderTTL: time.Second, RetryPolicy: fastRetry{}}
	if err := m.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	c, err := keel.NewClient(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx, c); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done() // until SIGKILL (or SIGTERM)
}

func poolSuffix(dsn string) string {
	if strings.Contains(dsn, "?") {
		return "&pool_max_conns=6"
	}
	return "?pool_max_conns=6"
}
