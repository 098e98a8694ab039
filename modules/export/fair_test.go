package export

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/module/moduletest"
)

// TestExportFairnessReserved: an export older than old_after keeps its
// reserved share of shard starts while nine tenants' new small exports
// flood the queue. Rotation alone would give its tenant one start in ten;
// with old_share 40 it gets at least floor(0.4 × N) of any N consecutive
// starts while it waits. The starts are read from the engine's job records
// (when each shard job was claimed), one shard at a time.
func TestExportFairnessReserved(t *testing.T) {
	each(t, testFairReserved[pgx.Tx], testFairReserved[*sql.Tx])
}

func testFairReserved[TTx any](t *testing.T, e *tenv[TTx]) {
	const share, flood, floodTasks = 40, 9, 2
	m := e.build(t, small(map[string]string{"export.memory_budget_mb": "30", "export.task_peak_mb": "30",
		"export.shard_rows": "100", "export.chunk_rows": "100", "export.user_inflight": "100",
		"export.old_after": "1h", "export.old_share": fmt.Sprint(share)}))
	if m.Concurrency() != 1 {
		t.Fatalf("concurrency %d", m.Concurrency())
	}
	// The old task is created on a clock two hours back.
	var back atomic.Int64
	m.SetClock(func() time.Time { return time.Now().Add(-time.Duration(back.Load())) })
	m.SetHeapWatermark(1) // nothing is claimed until every task exists
	c := e.start(t, m, 5*time.Second, false)
	seed(t, m, "old", 3000, alice) // 30 shards: it waits through the whole flood
	for i := 1; i <= flood; i++ {
		seed(t, m, fmt.Sprintf("f%d", i), 100, alice)
	}
	back.Store(int64(2 * time.Hour))
	old, err := m.Create(as(alice), Request{Tenant: "old"})
	back.Store(0)
	if err != nil {
		t.Fatal(err)
	}
	if old.ShardCount != 30 {
		t.Fatalf("old task has %d shards", old.ShardCount)
	}
	var small []int64
	for i := 1; i <= flood; i++ {
		for range floodTasks {
			tk, err := m.Create(as(alice), Request{Tenant: fmt.Sprintf("f%d", i), NewVersion: true})
			if err != nil {
				t.Fatal(err)
			}
			if tk.ShardCount != 1 {
				t.Fatalf("flood task has %d shards", tk.ShardCount)
			}
			small = append(small, tk.ID)
		}
	}
	m.SetHeapWatermark(1 << 40)
	moduletest.WaitFor(t, 4*time.Minute, "the flood's shards done", func() bool {
		for _, id := range small {
			tk, _ := m.Task(context.Background(), id)
			if tk.ShardsDone != tk.ShardCount {
				return false
			}
		}
		return true
	})
	type start struct {
		at  time.Time
		old bool
	}
	var starts []start
	// A flood shard whose attempt failed or lost its lease (a loaded
	// machine: a busy database, a missed heartbeat) waits out its retry
	// backoff, not claimable, while the old task takes every start; its job
	// records only its last attempt's claim. The window then ends at the
	// first such failure: after it the flood no longer had all its shards
	// waiting, and the share is not owed against shards that cannot start.
	var cut time.Time
	var retried []string
	for _, id := range append([]int64{old.ID}, small...) {
		shards, err := m.Shards(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range shards {
			j, err := c.JobGet(context.Background(), s.JobID)
			if err != nil {
				t.Fatal(err)
			}
			if j.AttemptedAt != nil {
				starts = append(starts, start{*j.AttemptedAt, id == old.ID})
			}
			if id == old.ID || j.Attempt <= 1 {
				continue
			}
			retried = append(retried, fmt.Sprintf("job %d: %d attempts %v", j.ID, j.Attempt, j.Errors))
			for _, e := range j.Errors {
				if cut.IsZero() || e.At.Before(cut) {
					cut = e.At
				}
			}
			if len(j.Errors) == 0 && (cut.IsZero() || j.AttemptedAt.Before(cut)) {
				cut = *j.AttemptedAt // a rescued lease leaves no error: its retry's claim bounds it
			}
		}
	}
	if len(retried) > 0 {
		t.Logf("flood shards that ran more than once: %v", retried)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].at.Before(starts[j].at) })
	// The window: from the first start to the flood's last, while both the
	// old task and the flood had shards waiting.
	last := 0
	seq := ""
	for i, s := range starts {
		if !cut.IsZero() && !s.at.Before(cut) {
			break
		}
		if !s.old {
			last = i
		}
	}
	starts = starts[:last+1]
	olds := 0
	for _, s := range starts {
		if s.old {
			seq += "O"
			olds++
		} else {
			seq += "n"
		}
	}
	if olds == 30 {
		t.Fatalf("the old task finished before the flood did (%s): the window does not measure the share", seq)
	}
	t.Logf("%d starts while the old task waited, %d of them its: %s", len(starts), olds, seq)
	for i := range starts {
		got := 0
		for j := i; j < len(starts); j++ {
			if starts[j].old {
				got++
			}
			n := j - i + 1
			if want := n * share / 100; got < want {
				t.Fatalf("starts %d..%d: the old task got %d of %d, less than its share %d (%s)", i+1, j+1, got, n, want, seq)
			}
		}
	}
	if got := m.Stat("shard_starts_old"); got < int64(olds) {
		t.Fatalf("the module counted %d old starts, the engine %d", got, olds)
	}
}
