// Package flowtest holds the multi-process flow-limit test: several OS
// processes, each with several fetch loops, claim rate-limited keys from one
// PostgreSQL; the claim time of every job proves the limit held globally.
package flowtest

import (
	"context"
	"log/slog"
	"sort"
	"time"

	"github.com/keelwork/keel"
)

// Keys are the limited flow keys; Rate is each key's limit.
var Keys = []string{"lim-a", "lim-b", "lim-c"}

// Rate is the per-key limit in claims per second (burst 0).
const Rate = 10

// Args is the test's job.
type Args struct{}

// Kind implements keel.JobArgs.
func (Args) Kind() string { return "flowtest.limited" }

// ClientConfig is one fetch loop's client.
func ClientConfig(id string, logger *slog.Logger) *keel.Config {
	ws := keel.NewWorkers()
	keel.AddWorker(ws, keel.WorkerFunc[Args](func(ctx context.Context, job *keel.Job[Args]) error { return nil }))
	return &keel.Config{
		ID: id, Workers: ws, Logger: logger,
		Queues:            map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 10}},
		FetchPollInterval: 200 * time.Millisecond,
		LeaderTTL:         time.Second,
	}
}

// MaxInWindow returns the largest number of claim times inside any
// half-open window [t, t+w).
func MaxInWindow(times []time.Time, w time.Duration) int {
	sorted := append([]time.Time(nil), times...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Before(sorted[j]) })
	best, j := 0, 0
	for i := range sorted {
		for j < len(sorted) && sorted[j].Sub(sorted[i]) < w {
			j++
		}
		best = max(best, j-i)
	}
	return best
}

// PacedRate is claims per second over the gaps between consecutive claims
// that are no longer than stall, and stalls counts the gaps that are. With
// burst 0 a limiter rightly does not make up for time in which nothing ran
// (a stalled machine, all keys losing the same second), so a stall is
// counted, not averaged in: the rate then measures the pacing itself, and a
// limiter that is slow claim by claim fails it however long the run. A
// limiter that often misses its token by a poll interval shows as stalls.
func PacedRate(times []time.Time, stall time.Duration) (rate float64, stalls int) {
	sorted := append([]time.Time(nil), times...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Before(sorted[j]) })
	var paced time.Duration
	var n int
	for i := 1; i < len(sorted); i++ {
		gap := sorted[i].Sub(sorted[i-1])
		if gap > stall {
			stalls++
			continue
		}
		paced += gap
		n++
	}
	if n == 0 || paced <= 0 {
		return 0, stalls
	}
	return float64(n) / paced.Seconds(), stalls
}

// AverageRate is claims per second between the first and last claim.
func AverageRate(times []time.Time) float64 {
	if len(times) < 2 {
		return 0
	}
	first, last := times[0], times[0]
	for _, t := range times {
		if t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return float64(len(times)-1) / last.Sub(first).Seconds()
}
