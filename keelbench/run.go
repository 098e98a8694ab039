package keelbench

import (
	"context"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelsql"
)

type noopArgs struct {
	// At is the enqueue time (unix ns) for latency runs.
	At int64 `json:"at,omitempty"`
}

func (noopArgs) Kind() string { return "bench.noop" }

// counter counts worked jobs and closes done at target.
type counter struct {
	n      atomic.Int64
	target int64
	done   chan struct{}
	once   sync.Once

	mu     sync.Mutex
	delays []time.Duration
	// trace, when set, records each job's timestamps (Config.Causes).
	trace *causeTrace
}

func (c *counter) Work(ctx context.Context, job *keel.Job[noopArgs]) error {
	if job.Args.At != 0 {
		now := time.Now()
		enq := time.Unix(0, job.Args.At)
		c.mu.Lock()
		c.delays = append(c.delays, now.Sub(enq))
		c.mu.Unlock()
		if c.trace != nil && job.AttemptedAt != nil {
			c.trace.start(job.ID, latencySample{enqueued: enq, started: now, attempted: *job.AttemptedAt})
		}
	}
	if c.n.Add(1) == c.target {
		c.once.Do(func() { close(c.done) })
	}
	return nil
}

func newClient[TTx any](d keeldriver.Driver[TTx], c *Config, w *counter) (*keel.Client[TTx], error) {
	ws := keel.NewWorkers()
	keel.AddWorker[noopArgs](ws, w)
	return keel.NewClient(d, &keel.Config{
		Workers: ws,
		Queues:  map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: c.Workers}},
		Logger:  c.Logger,
		// Only the latency run inserts one job at a time; drain and
		// continuous insert in bulk, which never starts on insert.
		DisableStartOnInsert: c.DisableStartOnInsert,
	})
}

func run[TTx any](ctx context.Context, d keeldriver.Driver[TTx], c *Config) (*Result, error) {
	if c.FinishedRows > 0 {
		if err := prefillFinished(ctx, d, c); err != nil {
			return nil, err
		}
	}
	switch c.Mode {
	case "drain":
		return drain(ctx, d, c)
	case "continuous":
		return continuous(ctx, d, c)
	}
	return latency(ctx, d, c)
}

func (c *Config) opts(i int) *keel.InsertOpts {
	if c.FlowKeys == 0 {
		return nil
	}
	return &keel.InsertOpts{FlowKey: fmt.Sprintf("bench:%d", i%c.FlowKeys)}
}

func insertBatch[TTx any](ctx context.Context, cl *keel.Client[TTx], c *Config, from, n int, args func() noopArgs) error {
	params := make([]keel.InsertParams, n)
	for i := range params {
		params[i] = keel.InsertParams{Args: args(), Opts: c.opts(from + i)}
	}
	if c.InsertRows {
		_, err := cl.InsertMany(ctx, params)
		return err
	}
	_, err := cl.InsertManyFast(ctx, params)
	return err
}

const insertChunk = 5000

// drain inserts N jobs before any worker runs, then times starting the
// client, working all N and a soft stop (which commits the last completions).
func drain[TTx any](ctx context.Context, d keeldriver.Driver[TTx], c *Config) (*Result, error) {
	w := &counter{target: int64(c.N), done: make(chan struct{})}
	cl, err := newClient(d, c, w)
	if err != nil {
		return nil, err
	}
	for i := 0; i < c.N; i += insertChunk {
		if err := insertBatch(ctx, cl, c, i, min(insertChunk, c.N-i), func() noopArgs { return noopArgs{} }); err != nil {
			return nil, fmt.Errorf("inserting: %w", err)
		}
	}
	c.Logger.Info("inserted; draining", "jobs", c.N)
	if d.Dialect() == "postgres" {
		// A table in production has statistics: autovacuum analyzes it
		// after a large insert like this one, and a plan that is fast only
		// on a never-analyzed table is a trap (a drain once fell from
		// 34,700 to 592 jobs/s this way; docs/benchmarks.md). bench/ does
		// the same for River's table.
		if err := d.Executor().Exec(ctx, "ANALYZE keel_job"); err != nil {
			return nil, fmt.Errorf("analyzing: %w", err)
		}
		// Start every timed run from a clean checkpoint (as bench/ does for
		// both engines), so a flush of the inserts does not land inside it.
		if err := d.Executor().Exec(ctx, "CHECKPOINT"); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	if err := cl.Start(ctx); err != nil {
		return nil, err
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		_ = cl.StopAndCancel(context.WithoutCancel(ctx))
		return nil, ctx.Err()
	}
	if err := cl.Stop(ctx); err != nil {
		return nil, err
	}
	el := time.Since(start)
	if c.ClaimStats != nil {
		claimStats(cl.Metrics(), c.ClaimStats)
	}
	return &Result{Mode: "drain", Jobs: c.N, Elapsed: el, JobsPerSec: float64(c.N) / el.Seconds()}, nil
}

// continuous keeps a backlog topped up while workers run for the duration.
func continuous[TTx any](ctx context.Context, d keeldriver.Driver[TTx], c *Config) (*Result, error) {
	w := &counter{target: -1, done: make(chan struct{})}
	cl, err := newClient(d, c, w)
	if err != nil {
		return nil, err
	}
	if err := cl.Start(ctx); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithTimeout(ctx, c.Duration)
	defer cancel()
	start := time.Now()
	inserted := 0
	for runCtx.Err() == nil {
		// Keep about two seconds of work queued, never an unbounded pile.
		if backlog := inserted - int(w.n.Load()); backlog > 4*insertChunk {
			time.Sleep(time.Millisecond)
			continue
		}
		if err := insertBatch(runCtx, cl, c, inserted, 1000, func() noopArgs { return noopArgs{} }); err != nil && runCtx.Err() == nil {
			return nil, err
		}
		inserted += 1000
	}
	worked := w.n.Load()
	el := time.Since(start)
	_ = cl.StopAndCancel(context.WithoutCancel(ctx))
	if c.ClaimStats != nil {
		claimStats(cl.Metrics(), c.ClaimStats)
	}
	return &Result{Mode: "continuous", Jobs: int(worked), Elapsed: el, JobsPerSec: float64(worked) / el.Seconds()}, nil
}

// latency offers Rate jobs/s, one insert statement each, and reports the
// delay from just before the insert to the worker's start.
func latency[TTx any](ctx context.Context, d keeldriver.Driver[TTx], c *Config) (*Result, error) {
	total := int(c.Duration.Seconds() * float64(c.Rate))
	w := &counter{target: int64(total), done: make(chan struct{})}
	if c.Causes != nil {
		w.trace = newCauseTrace()
	}
	cl, err := newClient(d, c, w)
	if err != nil {
		return nil, err
	}
	if err := cl.Start(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = cl.StopAndCancel(context.WithoutCancel(ctx)) }()
	runStart := time.Now()
	if w.trace != nil && d.Dialect() == "postgres" {
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		go w.trace.sampleWaits(sctx, keelsql.SingleConnURL(c.DatabaseURL))
	}
	if err := offer(ctx, cl, c, total, w.trace); err != nil {
		return nil, err
	}
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("only %d of %d jobs started", w.n.Load(), total)
	}
	if c.ClaimStats != nil {
		claimStats(cl.Metrics(), c.ClaimStats)
	}
	if w.trace != nil {
		w.trace.report(c.Causes, runStart)
	}
	return latencyResult(c, w.delays), nil
}

// offer paces inserts on a schedule (not back to back), several senders
// wide so one slow insert does not delay the next.
func offer[TTx any](ctx context.Context, cl *keel.Client[TTx], c *Config, total int, trace *causeTrace) error {
	interval := time.Second / time.Duration(c.Rate)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	sem := make(chan struct{}, 16)
	for i := 0; i < total; i++ {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			res, err := cl.Insert(ctx, noopArgs{At: time.Now().UnixNano()}, c.opts(i))
			if err != nil {
				select {
				case errs <- err:
				default:
				}
				return
			}
			if trace != nil {
				trace.insertDone(res.Job.ID, time.Now())
			}
		}(i)
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func latencyResult(c *Config, delays []time.Duration) *Result {
	slices.Sort(delays)
	pct := func(p float64) time.Duration { return delays[min(len(delays)-1, int(p*float64(len(delays))))] }
	return &Result{Mode: "latency", Jobs: len(delays), Elapsed: c.Duration, JobsPerSec: float64(c.Rate),
		P50: pct(0.50), P90: pct(0.90), P99: pct(0.99), Max: delays[len(delays)-1]}
}

// claimStats reports how many claim statements ran and how long they took:
// the first thing to look at when a drain is slower than expected.
func claimStats(m *keel.Metrics, out io.Writer) {
	ch := make(chan prometheus.Metric, 100)
	go func() { m.ClaimLatency.Collect(ch); close(ch) }()
	for metric := range ch {
		var pb dto.Metric
		_ = metric.Write(&pb)
		h := pb.GetHistogram()
		fmt.Fprintf(out, "claims: %d statements, %.3fs in total, %.3fms each\n", h.GetSampleCount(), h.GetSampleSum(), 1000*h.GetSampleSum()/float64(max(1, h.GetSampleCount())))
	}
}
