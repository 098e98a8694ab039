package export

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelwork/keel/module/moduletest"
)

// heapBound is the bound docs/export.md states for a 2,000,000-row export
// under a 256 MiB memory limit (GOMEMLIMIT's knob, set for this process).
const heapBound = 160 << 20

// TestExportMemoryBound: 2,000,000 rows on PostgreSQL under a memory
// limit; the live heap stays below heapBound throughout. SQLite runs
// 500,000 rows (its one writer makes generating 2,000,000 rows alone take
// minutes of CI's two cores; the heap per running shard does not depend
// on the total). Not parallel, and the two databases one after the
// other: the heap is measured with nothing else of this package running.
// Under the race detector a tenth of the rows. (The watermark pausing
// claims is TestExportWatermark, on both databases.)
func TestExportMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000,000 rows")
	}
	t.Run("postgres", func(t *testing.T) { testMemoryBound(t, newTenv(moduletest.Postgres(t, testLines)), 2_000_000) })
	if raceOn {
		// See race_on_test.go: make test runs the SQLite half at full size
		// in its step without -race.
		t.Logf("sqlite subtest: run without -race (go test -run '%s/^sqlite$')", t.Name())
		return
	}
	t.Run("sqlite", func(t *testing.T) { testMemoryBound(t, newTenv(moduletest.SQLite(t, testLines)), 2_000_000) })
}

func testMemoryBound[TTx any](t *testing.T, e *tenv[TTx], rows int) {
	m := e.build(t, map[string]string{"export.storage": "file", "export.memory_budget_mb": "96", "export.task_peak_mb": "24"})
	if m.Concurrency() != 4 {
		t.Fatalf("concurrency %d, want floor(96/24) = 4", m.Concurrency())
	}
	if raceOn {
		// A tenth under the race detector (docs/export.md); the full
		// size runs without it in make test.
		rows /= 10
	}
	seed(t, m, "mem", rows, alice)
	prev := debug.SetMemoryLimit(256 << 20)
	defer debug.SetMemoryLimit(prev)
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		s := []metrics.Sample{{Name: heapMetric}}
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
		}
	}()
	e.start(t, m, 30*time.Second, false)
	task, err := m.Create(as(alice), Request{Tenant: "mem"})
	if err != nil {
		t.Fatal(err)
	}
	done := waitState(t, m, task.ID, 12*time.Minute, StateSucceeded)
	close(stop)
	<-sampled
	if done.Verdict != "ok" || done.ObjectRows != int64(rows) {
		t.Fatalf("verdict %s rows %d: %s", done.Verdict, done.ObjectRows, done.VerdictDetail)
	}
	t.Logf("%s: peak live heap %.1f MiB over %d rows (%d shards, concurrency %d)", e.Name, float64(peak.Load())/(1<<20), rows, done.ShardCount, m.Concurrency())
	if peak.Load() >= heapBound {
		t.Fatalf("peak live heap %d bytes, bound %d", peak.Load(), heapBound)
	}
}
