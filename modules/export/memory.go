package export

import (
	"context"
	"runtime/metrics"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelwork/keel/keelsql"
)

// Claiming is bounded twice. The shard queue's concurrency is
// floor(memory budget / per-task peak) (Configure). And before every fetch
// the engine asks claimKeys which flow keys this instance takes: above the
// heap watermark the answer is none, so no new shard is claimed while the
// running ones keep their leases and finish; below it, every tenant with
// running work, which the engine serves in weighted rotation (fairness)
// with priority ageing.
//
// Rotation serves tenants, not tasks: a flood of new tenants with small
// exports would cut an old large export's turns to one in as many tenants
// as there are. So a share of this instance's shard starts is reserved for
// tasks older than old_after: the starts owed to them are kept as a debt,
// in hundredths of a start, raised by old_share at every start while such
// a task has a shard waiting and lowered by a whole start at each start of
// an old task's shard. When the next start would leave a whole start owed,
// claimKeys offers only the old tasks' tenants. In any run of N starts while
// an old task waits, at least floor(N × old_share / 100) are old tasks'.
// The shard queue's keys carry a running-shard limit (tenant_shards), which
// makes the engine claim them only into free worker slots, never into its
// fetch-ahead buffer: a claim is a start, so the debt counts what it steers.

const heapMetric = "/memory/classes/heap/objects:bytes"

var heapSample = sync.Pool{New: func() any { return []metrics.Sample{{Name: heapMetric}} }}

// heap is the live heap in bytes (runtime/metrics: cheap, no stop-the-world).
func (m *Module[TTx]) heap() uint64 {
	if m.hooks.Heap != nil {
		return m.hooks.Heap()
	}
	s := heapSample.Get().([]metrics.Sample)
	defer heapSample.Put(s)
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// claimKeys is the shard queue's FlowKeys: none above the watermark.
func (m *Module[TTx]) claimKeys() []string {
	h := m.heap()
	if h > m.peakHeap.Load() {
		m.peakHeap.Store(h)
	}
	if h >= m.watermark.Load() {
		if !m.paused.Swap(true) {
			m.pauses.Add(1)
			m.Log.Warn("export heap above the watermark: claiming paused", "heap", h, "watermark", m.watermark.Load())
		}
		return []string{}
	}
	if m.paused.Swap(false) {
		m.Log.Info("export heap below the watermark: claiming resumed", "heap", h)
	}
	if old := *m.oldKeys.Load(); len(old) > 0 && m.oweOld() {
		return old
	}
	return *m.keys.Load()
}

// oweOld reports whether the next start is owed to an old task.
func (m *Module[TTx]) oweOld() bool {
	m.resMu.Lock()
	defer m.resMu.Unlock()
	return m.set.oldShare > 0 && m.debt+m.set.oldShare >= 100
}

// noteStart books one shard start of task t in the reserved share, then
// reads the waiting tasks again (t's shard is no longer waiting).
func (m *Module[TTx]) noteStart(ctx context.Context, t *Task) {
	old := m.set.oldShare > 0 && !t.CreatedAt.After(m.Now().Add(-m.set.oldAfter))
	m.resMu.Lock()
	if len(*m.oldKeys.Load()) == 0 {
		m.debt = 0 // nothing old waits: no debt is carried into a later wait
	} else {
		m.debt += m.set.oldShare
		if old {
			m.debt = max(0, m.debt-100) // a surplus is not banked either
		}
	}
	m.resMu.Unlock()
	m.count("shard_starts")
	if old {
		m.count("shard_starts_old")
	}
	m.refreshKeys(ctx)
}

// Paused reports whether the watermark currently holds claims back, and
// how many times it has.
func (m *Module[TTx]) Paused() (bool, int64) { return m.paused.Load(), m.pauses.Load() }

// refreshKeys reads the tenants with running tasks (their flow keys).
func (m *Module[TTx]) refreshKeys(ctx context.Context) {
	rows, err := m.DB.Query(ctx, m.q.Get("RunningTenants"))
	tenants, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (string, error) {
		var s string
		return s, r.Scan(&s)
	})
	if err != nil {
		return // keep the last set; the next tick retries
	}
	keys := make([]string, len(tenants))
	for i, t := range tenants {
		keys[i] = flowKey(t)
	}
	m.keys.Store(&keys)
	old := []string{}
	if m.set.oldShare > 0 {
		rows, err := m.DB.Query(ctx, m.q.Get("OldWaitingTenants"), m.Now().Add(-m.set.oldAfter))
		tenants, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (string, error) {
			var s string
			return s, r.Scan(&s)
		})
		if err != nil {
			return
		}
		for _, t := range tenants {
			old = append(old, flowKey(t))
		}
	}
	m.oldKeys.Store(&old)
}

// keyLoop refreshes the tenant keys (another instance may have created a
// task) and wakes the queue when the set grows or claiming resumes — not
// on every tick: each wake is a claim query, and on SQLite a claim holds
// the one writer.
func (m *Module[TTx]) keyLoop(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	wasPaused := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		before := *m.keys.Load()
		m.refreshKeys(ctx)
		m.claimKeys()
		p := m.paused.Load()
		grew := false
		for _, k := range *m.keys.Load() {
			if !slices.Contains(before, k) {
				grew = true
			}
		}
		if c := m.Engine().Load(); c != nil && (wasPaused && !p || grew) {
			c.WakeQueue(QueueShards)
		}
		wasPaused = p
	}
}

func (m *Module[TTx]) registerMetrics() error {
	return m.Register(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keel_export_heap_bytes", Help: "Live heap read by the export watermark."},
			func() float64 { return float64(m.heap()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keel_export_claims_paused", Help: "1 while the heap watermark holds shard claims back."},
			func() float64 {
				if m.paused.Load() {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keel_export_concurrency", Help: "Shards this instance runs at once: floor(budget / per-task peak)."},
			func() float64 { return float64(m.set.concurrency()) }),
	)
}
