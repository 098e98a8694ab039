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
