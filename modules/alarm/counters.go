package alarm

import (
	"context"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Stages of the per-stage counters (what came in, went out, was
// aggregated, sampled or shed, and why), kept in memory and added to the
// database's alarm_counter every second, so that they survive restarts and
// are summed across instances.
const (
	StageIngest   = "ingest"
	StageEval     = "eval"
	StageNotice   = "notice"
	StageSevere   = "severe"
	StagePressure = "pressure"
)

// Counters are the module's per-stage counters.
type Counters struct {
	flushMu sync.Mutex
	mu      sync.Mutex
	pending map[string]*atomic.Int64
	vec     *prometheus.CounterVec
}

func newCounters() *Counters {
	return &Counters{pending: map[string]*atomic.Int64{},
		vec: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keel_alarm_stage_total",
			Help: "Alarm pipeline counts by stage and reason (in, out, aggregated, sampled, shed by reason)."},
			[]string{"stage", "reason"})}
}

// Add counts n of stage/reason.
func (c *Counters) Add(stage, reason string, n int64) {
	if n == 0 {
		return
	}
	k := stage + "\x00" + reason
	c.mu.Lock()
	v, ok := c.pending[k]
	if !ok {
		v = &atomic.Int64{}
		c.pending[k] = v
	}
	c.mu.Unlock()
	v.Add(n)
	c.vec.WithLabelValues(stage, reason).Add(float64(n))
}

// drain returns and zeroes what was counted since the last drain.
func (c *Counters) drain() map[[2]string]int64 {
	out := map[[2]string]int64{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.pending {
		if n := v.Swap(0); n != 0 {
			s, r, _ := strings.Cut(k, "\x00")
			out[[2]string{s, r}] = n
		}
	}
	return out
}

// flushCounters adds the drained counts to the database (given back to
// the pending counts on failure, so none is lost).
func (m *Module[TTx]) flushCounters(ctx context.Context) error {
	// One flush at a time: a reader flushing first then reading must see
	// what a concurrent flush drained.
	m.counters.flushMu.Lock()
	defer m.counters.flushMu.Unlock()
	d := m.counters.drain()
	if len(d) == 0 {
		return nil
	}
	keys := make([][2]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for i, k := range keys {
		if _, err := m.DB.Exec(ctx, m.q.Get("CounterAdd"), k[0], k[1], d[k]); err != nil {
			for _, r := range keys[i:] {
				m.counters.Add(r[0], r[1], d[r])
			}
			return err
		}
	}
	return nil
}

// Counter is one persisted counter.
type Counter struct {
	Stage  string `json:"stage"`
	Reason string `json:"reason"`
	N      int64  `json:"n"`
}

// CounterList reads the persisted counters (after adding what is pending).
func (m *Module[TTx]) CounterList(ctx context.Context) ([]Counter, error) {
	if err := m.flushCounters(ctx); err != nil {
		return nil, err
	}
	rows, err := m.DB.Query(ctx, m.q.Get("CounterList"))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Counter
	for rows.Next() {
		var c Counter
		if err := rows.Scan(&c.Stage, &c.Reason, &c.N); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// CounterMap is CounterList as stage/reason → n.
func (m *Module[TTx]) CounterMap(ctx context.Context) (map[string]int64, error) {
	cs, err := m.CounterList(ctx)
	out := map[string]int64{}
	for _, c := range cs {
		out[c.Stage+"/"+c.Reason] = c.N
	}
	return out, err
}
