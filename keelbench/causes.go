package keelbench

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// A latency run with Config.Causes set splits every job's enqueue→start
// delay into three segments and reports which one made the tail:
//
//   - insert: from the stamp taken before Insert until Insert returned (its
//     commit, and the wait for a pool connection);
//   - claim wait: from Insert's return until the claim statement that took
//     the job began (the job's attempted_at, the database clock of the same
//     host): the notification's delay and any wait for a fetch loop busy
//     with an earlier claim;
//   - claim and start: from that statement's start until the worker ran
//     (the statement itself, including server-side lock waits, then the
//     hand-off to the job's goroutine).
//
// Beside them it reports what the segments cannot show by themselves: the
// Go runtime's GC pauses (and which tail jobs had one inside their delay),
// the scheduler's latency (how long runnable goroutines waited for a CPU,
// the measure of a busy machine), and a sample of what the database's
// backends were waiting on while the run lasted (lock waits, WAL flushes).

// latencySample is one job's timestamps.
type latencySample struct {
	enqueued, started time.Time
	attempted         time.Time // the claim's start, database clock
}

// causeTrace collects samples during a latency run.
type causeTrace struct {
	mu       sync.Mutex
	started  map[int64]latencySample
	inserted map[int64]time.Time
	waits    map[string]int
	polls    int
	sched0   *metrics.Float64Histogram
}

func newCauseTrace() *causeTrace {
	t := &causeTrace{started: map[int64]latencySample{}, inserted: map[int64]time.Time{}, waits: map[string]int{}}
	t.sched0 = schedLatencies()
	return t
}

func (t *causeTrace) start(id int64, s latencySample) {
	t.mu.Lock()
	t.started[id] = s
	t.mu.Unlock()
}

func (t *causeTrace) insertDone(id int64, at time.Time) {
	t.mu.Lock()
	t.inserted[id] = at
	t.mu.Unlock()
}

// sampleWaits reads pg_stat_activity every 10 ms until ctx ends: the
// database's own view of what its busy backends wait on. It uses one
// connection of its own, so it never takes one the engine needs.
func (t *causeTrace) sampleWaits(ctx context.Context, url string) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rows, err := conn.Query(ctx, `SELECT coalesce(wait_event_type || ':' || wait_event, 'on CPU'), count(*)
			FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()
			GROUP BY 1`)
		if err != nil {
			return
		}
		t.mu.Lock()
		t.polls++
		for rows.Next() {
			var ev string
			var n int
			if rows.Scan(&ev, &n) == nil {
				t.waits[ev] += n
			}
		}
		t.mu.Unlock()
		rows.Close()
	}
}

func schedLatencies() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// schedQuantile is the q-quantile of the scheduler latencies recorded since
// before (an upper bucket bound).
func schedQuantile(before, after *metrics.Float64Histogram, q float64) (time.Duration, uint64) {
	if before == nil || after == nil || len(before.Counts) != len(after.Counts) {
		return 0, 0
	}
	var total uint64
	d := make([]uint64, len(after.Counts))
	for i := range d {
		d[i] = after.Counts[i] - before.Counts[i]
		total += d[i]
	}
	if total == 0 {
		return 0, 0
	}
	want := uint64(q * float64(total))
	var acc uint64
	for i, n := range d {
		acc += n
		if acc > want {
			return time.Duration(after.Buckets[i+1] * float64(time.Second)), total
		}
	}
	return 0, total
}

// gcPause is one stop-the-world pause.
type gcPause struct {
	start, end time.Time
}

func gcPausesSince(t0 time.Time) []gcPause {
	var s debug.GCStats
	s.PauseQuantiles = nil
	debug.ReadGCStats(&s)
	var out []gcPause
	for i, end := range s.PauseEnd {
		if end.Before(t0) || i >= len(s.Pause) {
			continue
		}
		out = append(out, gcPause{start: end.Add(-s.Pause[i]), end: end})
	}
	return out
}

// report writes the breakdown: segment quantiles over every job, the
// dominant segment of each job at or above p99, and the context.
func (t *causeTrace) report(w io.Writer, runStart time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	type seg struct{ total, insert, wait, claim time.Duration }
	var segs []seg
	var overlaps []bool
	pauses := gcPausesSince(runStart)
	for id, s := range t.started {
		ret, ok := t.inserted[id]
		if !ok {
			continue
		}
		claimFrom := s.attempted
		if claimFrom.Before(ret) {
			claimFrom = ret // woken by its own commit before Insert returned
		}
		x := seg{total: s.started.Sub(s.enqueued), insert: ret.Sub(s.enqueued), wait: claimFrom.Sub(ret), claim: s.started.Sub(claimFrom)}
		segs = append(segs, x)
		gc := false
		for _, p := range pauses {
			if p.start.Before(s.started) && p.end.After(s.enqueued) {
				gc = true
				break
			}
		}
		overlaps = append(overlaps, gc)
	}
	if len(segs) == 0 {
		fmt.Fprintln(w, "causes: no job could be traced")
		return
	}
	idx := make([]int, len(segs))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return segs[idx[a]].total < segs[idx[b]].total })
	q := func(get func(seg) time.Duration, p float64) time.Duration {
		v := make([]time.Duration, len(segs))
		for i, s := range segs {
			v[i] = get(s)
		}
		slices.Sort(v)
		return v[min(len(v)-1, int(p*float64(len(v))))]
	}
	line := func(name string, get func(seg) time.Duration) {
		fmt.Fprintf(w, "causes: %-15s p50 %s  p99 %s  p99.9 %s  max %s\n", name, ms(q(get, 0.5)), ms(q(get, 0.99)), ms(q(get, 0.999)), ms(q(get, 1)))
	}
	fmt.Fprintf(w, "causes: %d jobs traced\n", len(segs))
	line("enqueue→start", func(s seg) time.Duration { return s.total })
	line("insert", func(s seg) time.Duration { return s.insert })
	line("claim wait", func(s seg) time.Duration { return s.wait })
	line("claim and start", func(s seg) time.Duration { return s.claim })
	tail := idx[min(len(idx)-1, int(0.99*float64(len(idx)))):]
	var dom [3]int
	var domTime [3]time.Duration
	gcTail := 0
	for _, i := range tail {
		s := segs[i]
		parts := [3]time.Duration{s.insert, s.wait, s.claim}
		m := 0
		for k := range parts {
			domTime[k] += parts[k]
			if parts[k] > parts[m] {
				m = k
			}
		}
		dom[m]++
		if overlaps[i] {
			gcTail++
		}
	}
	n := len(tail)
	names := [3]string{"insert", "claim wait", "claim and start"}
	var b strings.Builder
	for k := range names {
		fmt.Fprintf(&b, "  %s %d (%.0f%% of their time)", names[k], dom[k],
			100*float64(domTime[k])/float64(max(1, domTime[0]+domTime[1]+domTime[2])))
	}
	fmt.Fprintf(w, "causes: the %d jobs at or above p99 (≥ %s), by largest segment:%s; a GC pause inside the delay: %d\n",
		n, ms(segs[tail[0]].total), b.String(), gcTail)
	var pauseTotal, pauseMax time.Duration
	for _, p := range pauses {
		d := p.end.Sub(p.start)
		pauseTotal += d
		pauseMax = max(pauseMax, d)
	}
	fmt.Fprintf(w, "causes: GC: %d pauses, %s in total, longest %s (the last 256 at most)\n", len(pauses), ms(pauseTotal), ms(pauseMax))
	if p99, count := schedQuantile(t.sched0, schedLatencies(), 0.99); count > 0 {
		p999, _ := schedQuantile(t.sched0, schedLatencies(), 0.999)
		fmt.Fprintf(w, "causes: Go scheduler latency (runnable → running) p99 %s, p99.9 %s over %d goroutine starts\n", ms(p99), ms(p999), count)
	}
	if t.polls > 0 {
		type ev struct {
			name string
			n    int
		}
		var evs []ev
		sum := 0
		for k, v := range t.waits {
			evs = append(evs, ev{k, v})
			sum += v
		}
		sort.Slice(evs, func(a, b int) bool { return evs[a].n > evs[b].n })
		b.Reset()
		for i, e := range evs {
			if i == 8 {
				break
			}
			fmt.Fprintf(&b, "  %s %.1f%%", e.name, 100*float64(e.n)/float64(max(1, sum)))
		}
		fmt.Fprintf(w, "causes: database backends sampled every 10 ms (%d samples, %.2f busy backends on average):%s\n",
			t.polls, float64(sum)/float64(t.polls), b.String())
	}
}
