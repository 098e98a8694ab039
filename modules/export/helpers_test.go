package export

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/csv"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
)

var testLines = moduletest.Lines(moduletest.EventsLines, Lines)

// quiet is a silent logger, or stderr's with KEEL_EXPORT_DEBUG set.
func quiet() *slog.Logger {
	if os.Getenv("KEEL_EXPORT_DEBUG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return moduletest.Quiet()
}

// tenv is one test database (the kit's Env) with the events backbone on
// the in-database bus.
type tenv[TTx any] struct {
	*moduletest.Env[TTx]
	ev *keelevents.Events[TTx]
}

func newTenv[TTx any](e *moduletest.Env[TTx]) *tenv[TTx] { return &tenv[TTx]{Env: e} }

// each runs a generic test once per database, in parallel.
func each(t *testing.T, pg func(t *testing.T, e *tenv[pgx.Tx]), lite func(t *testing.T, e *tenv[*sql.Tx])) {
	moduletest.Each(t, testLines, moduletest.With(newTenv[pgx.Tx], pg), moduletest.With(newTenv[*sql.Tx], lite))
}

// small are settings that make a few thousand rows many shards and chunks.
func small(extra map[string]string) map[string]string {
	// Two shards at once: enough to interleave, few enough that SQLite's
	// one writer is not the test's bottleneck under the race detector.
	s := map[string]string{"export.shard_rows": "500", "export.chunk_rows": "200", "export.batch_rows": "64",
		"export.storage": "file", "export.memory_budget_mb": "48", "export.task_peak_mb": "24"}
	for k, v := range extra {
		s[k] = v
	}
	return s
}

// build makes the events backbone and the module (not started).
func (e *tenv[TTx]) build(t testing.TB, settings map[string]string, opts ...Option) *Module[TTx] {
	t.Helper()
	if _, ok := settings["export.dir"]; !ok {
		settings["export.dir"] = t.TempDir()
	}
	e.ev = e.Events(t, &keelevents.Config{Partitions: 4, LeaseTTL: 2 * time.Second, StatsInterval: time.Hour, Logger: quiet()})
	h := &module.Host[TTx]{DB: e.DB, Logger: quiet(), Settings: settings, Events: e.ev}
	m, err := New(h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// start runs an engine client with the module (and the events backbone
// when withEvents); lease is the engine lease.
func (e *tenv[TTx]) start(t testing.TB, m *Module[TTx], lease time.Duration, withEvents bool) *keel.Client[TTx] {
	t.Helper()
	return e.startWith(t, m, lease, withEvents, nil)
}

// startWith is start with the engine's configuration edited after the
// module configured it (nil: unchanged).
func (e *tenv[TTx]) startWith(t testing.TB, m *Module[TTx], lease time.Duration, withEvents bool, edit func(*keel.Config)) *keel.Client[TTx] {
	t.Helper()
	cfg := &keel.Config{Logger: quiet(), LeaseDuration: lease, FetchPollInterval: 200 * time.Millisecond,
		RescueInterval: 100 * time.Millisecond, PromoteInterval: 50 * time.Millisecond, LeaderTTL: time.Second,
		StopHandBack: 200 * time.Millisecond, RetryPolicy: fastRetry{}}
	if withEvents {
		if err := e.ev.Configure(cfg); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(cfg)
	}
	if withEvents {
		return e.Run(t, cfg, e.ev, m)
	}
	return e.Run(t, cfg, m)
}

// fastRetry retries at once-ish: tests wait on conditions, not backoffs.
type fastRetry struct{}

func (fastRetry) NextRetry(int) time.Duration { return 20 * time.Millisecond }

func as(user string) context.Context { return keel.WithActor(context.Background(), user) }

// waitState waits for a task to reach a state.
func waitState[TTx any](t testing.TB, m *Module[TTx], id int64, within time.Duration, state string) *Task {
	t.Helper()
	var last *Task
	moduletest.WaitFor(t, within, "export "+strconv.FormatInt(id, 10)+" "+state, func() bool {
		tk, err := m.Task(context.Background(), id)
		if err != nil {
			return false
		}
		last = tk
		return tk.State == state
	})
	return last
}

// fileRows downloads a task's file as user and parses it: header and rows.
// It checks the bytes against the task's digest.
func fileRows[TTx any](t testing.TB, m *Module[TTx], id int64, user string) ([]string, [][]string) {
	t.Helper()
	var buf bytes.Buffer
	if err := m.Download(as(user), id, &buf); err != nil {
		t.Fatalf("download: %v", err)
	}
	tk, _ := m.Task(context.Background(), id)
	sum := sha256.Sum256(buf.Bytes())
	if hex.EncodeToString(sum[:]) != tk.ObjectSHA256 {
		t.Fatalf("downloaded digest %x, task says %s", sum, tk.ObjectSHA256)
	}
	var r io.Reader = &buf
	if tk.Gzip {
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	b, _ := io.ReadAll(r)
	b = bytes.TrimPrefix(b, []byte{0xEF, 0xBB, 0xBF})
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatalf("parsing the file: %v", err)
	}
	if len(recs) == 0 {
		t.Fatal("empty file: no header")
	}
	return recs[0], recs[1:]
}

// expectedCut reads the cut of version v straight from the source table.
func expectedCut[TTx any](t testing.TB, m *Module[TTx], tenant string, v int64) map[string][]string {
	t.Helper()
	q := "SELECT id, order_no, customer, amount_minor, currency, status, created_at FROM export_orders WHERE tenant = " + m.ph(1) +
		" AND valid_from <= " + m.ph(2) + " AND (valid_to IS NULL OR valid_to > " + m.ph(2) + ") ORDER BY id"
	rows, err := m.DB.Query(context.Background(), q, tenant, v)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]string{}
	rec := make([]string, len(Columns))
	for rows.Next() {
		var o orderRow
		if err := rows.Scan(&o.id, &o.orderNo, &o.customer, &o.amount, &o.currency, &o.status, &o.createdAt); err != nil {
			t.Fatal(err)
		}
		o.record(Columns, rec)
		out[rec[0]] = append([]string(nil), rec...)
	}
	return out
}

// seed generates n orders for tenant and grants user both permissions.
func seed[TTx any](t testing.TB, m *Module[TTx], tenant string, n int, users ...string) {
	t.Helper()
	ctx := context.Background()
	if err := m.Generate(ctx, tenant, n); err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		if err := m.Grant(ctx, tenant, u, PermExport, PermAmount); err != nil {
			t.Fatal(err)
		}
	}
}
