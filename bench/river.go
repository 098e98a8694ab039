package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverTuning is River's fetch settings for one run. The zero value is
// River's own defaults (FetchCooldown 100ms, FetchPollInterval 1s).
type riverTuning struct {
	FetchCooldown     time.Duration
	FetchPollInterval time.Duration
}

// riverTuned is the setting the comparison uses: River's minimums, so River
// is not held back by its 100 ms default cooldown between fetches.
var riverTuned = riverTuning{FetchCooldown: river.FetchCooldownMin, FetchPollInterval: river.FetchPollIntervalMin}

func (t riverTuning) String() string {
	if t == (riverTuning{}) {
		return fmt.Sprintf("defaults: FetchCooldown %s, FetchPollInterval %s", river.FetchCooldownDefault, river.FetchPollIntervalDefault)
	}
	return fmt.Sprintf("FetchCooldown %s, FetchPollInterval %s", t.FetchCooldown, t.FetchPollInterval)
}

// noopArgs is the River job: it does nothing but report that it started.
// Stamp is the enqueue time (UnixNano) in latency runs, 0 otherwise.
type noopArgs struct {
	Stamp int64 `json:"t,omitempty"`
}

func (noopArgs) Kind() string { return "bench_noop" }

// runState is what the worker reports into: a count of finished jobs, a
// channel closed when the count reaches target (if target > 0), and
// enqueue→start delays when latency is being measured.
type runState struct {
	done    atomic.Int64
	target  int64
	reached chan struct{}
	once    sync.Once

	mu     sync.Mutex
	delays []time.Duration
}

func newRunState(target int) *runState {
	return &runState{target: int64(target), reached: make(chan struct{})}
}

// started records an enqueue→start delay (stamp is UnixNano, 0 for none).
func (s *runState) started(stamp int64) {
	if stamp == 0 {
		return
	}
	d := time.Since(time.Unix(0, stamp))
	s.mu.Lock()
	s.delays = append(s.delays, d)
	s.mu.Unlock()
}

// finished counts one worked job.
func (s *runState) finished() {
	if n := s.done.Add(1); s.target > 0 && n >= s.target {
		s.once.Do(func() { close(s.reached) })
	}
}

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	state *runState
}

func (w *noopWorker) Work(_ context.Context, job *river.Job[noopArgs]) error {
	w.state.started(job.Args.Stamp)
	w.state.finished()
	return nil
}

// riverEnv is one River run's fresh schema, pool and client.
type riverEnv struct {
	pool   *pgxpool.Pool
	schema string
	client *river.Client[pgx.Tx]
	state  *runState
	log    *slog.Logger
}

// runRiver performs one River run with the shape in cfg, on a fresh schema
// of cfg.DatabaseURL that is dropped afterwards.
func runRiver(ctx context.Context, cfg *runConfig, tuning riverTuning) (res *Result, err error) {
	env, err := newRiverEnv(ctx, cfg, tuning)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := env.close(context.WithoutCancel(ctx)); err == nil && cerr != nil {
			err = cerr
		}
	}()
	switch cfg.Mode {
	case "drain":
		return env.drain(ctx, cfg)
	case "continuous":
		return env.continuous(ctx, cfg)
	case "latency":
		return env.latency(ctx, cfg)
	}
	return nil, fmt.Errorf("unknown mode %q", cfg.Mode)
}

func newRiverEnv(ctx context.Context, cfg *runConfig, tuning riverTuning) (_ *riverEnv, err error) {
	pool, err := openPool(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	env := &riverEnv{pool: pool, schema: "river_bench_" + randHex(), log: cfg.logger()}
	defer func() {
		if err != nil {
			_ = env.close(context.WithoutCancel(ctx))
		}
	}()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+env.schema); err != nil {
		return nil, fmt.Errorf("river: creating schema: %w", err)
	}
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: env.schema, Logger: env.log})
	if err != nil {
		return nil, fmt.Errorf("river: migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("river: migrating: %w", err)
	}
	env.state = newRunState(0)
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{state: env.state})
	client, err := river.NewClient(driver, &river.Config{
		Schema:            env.schema,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers}},
		Workers:           workers,
		FetchCooldown:     tuning.FetchCooldown,
		FetchPollInterval: tuning.FetchPollInterval,
		Logger:            env.log,
	})
	if err != nil {
		return nil, fmt.Errorf("river: client: %w", err)
	}
	env.client = client
	return env, nil
}

// close stops the client if it runs, drops the schema and closes the pool.
func (e *riverEnv) close(ctx context.Context) error {
	var errs []error
	if e.client != nil {
		stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := e.client.Stop(stopCtx); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("river: stopping: %w", err))
		}
		cancel()
	}
	if _, err := e.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+e.schema+" CASCADE"); err != nil {
		errs = append(errs, fmt.Errorf("river: dropping schema: %w", err))
	}
	e.pool.Close()
	return errors.Join(errs...)
}

// insertNoops inserts n no-op jobs in batches with River's bulk (COPY) path.
func (e *riverEnv) insertNoops(ctx context.Context, n int) error {
	batch := make([]river.InsertManyParams, 0, insertBatch)
	for left := n; left > 0; {
		k := min(left, insertBatch)
		batch = batch[:0]
		for range k {
			batch = append(batch, river.InsertManyParams{Args: noopArgs{}})
		}
		if _, err := e.client.InsertManyFast(ctx, batch); err != nil {
			return fmt.Errorf("river: inserting: %w", err)
		}
		left -= k
	}
	return nil
}

// completedCount counts completed rows, to check that every worked job was
// also recorded as completed.
func (e *riverEnv) completedCount(ctx context.Context) (int, error) {
	var n int
	err := e.pool.QueryRow(ctx, "SELECT count(*) FROM "+e.schema+".river_job WHERE state = 'completed'").Scan(&n)
	return n, err
}

// stop stops the client, which flushes its batched completions.
func (e *riverEnv) stop(ctx context.Context) error {
	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := e.client.Stop(stopCtx); err != nil {
		return fmt.Errorf("river: stopping: %w", err)
	}
	e.client = nil
	return nil
}

// verify checks that at least want jobs are completed in the table.
func (e *riverEnv) verify(ctx context.Context, want int) error {
	got, err := e.completedCount(ctx)
	if err != nil {
		return fmt.Errorf("river: counting completed: %w", err)
	}
	if got < want {
		return fmt.Errorf("river: %d jobs worked but only %d completed in river_job", want, got)
	}
	return nil
}

// stopAndVerify stops the client and checks that at least want jobs are
// completed in the table.
func (e *riverEnv) stopAndVerify(ctx context.Context, want int) error {
	if err := e.stop(ctx); err != nil {
		return err
	}
	return e.verify(ctx, want)
}

// drain inserts N jobs, then starts the client and times until the workers
// have run all N.
func (e *riverEnv) drain(ctx context.Context, cfg *runConfig) (*Result, error) {
	if err := e.insertNoops(ctx, cfg.N); err != nil {
		return nil, err
	}
	// With statistics, as keelbench's drain has them (it analyzes keel_job
	// after its insert): autovacuum would analyze a table after such an
	// insert in production.
	if _, err := e.pool.Exec(ctx, "ANALYZE "+e.schema+".river_job"); err != nil {
		return nil, fmt.Errorf("river: analyzing: %w", err)
	}
	e.state.target = int64(cfg.N)
	start := time.Now()
	if err := e.client.Start(ctx); err != nil {
		return nil, fmt.Errorf("river: starting: %w", err)
	}
	select {
	case <-e.state.reached:
	case <-ctx.Done():
		return nil, fmt.Errorf("river: drain: %d of %d jobs worked: %w", e.state.done.Load(), cfg.N, ctx.Err())
	}
	// Stop is timed too, as in keelbench: it commits the last batch of
	// completions.
	if err := e.stop(ctx); err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	if err := e.verify(ctx, cfg.N); err != nil {
		return nil, err
	}
	return &Result{Mode: "drain", Jobs: cfg.N, Elapsed: elapsed, JobsPerSec: float64(cfg.N) / elapsed.Seconds()}, nil
}

// continuous runs a producer that keeps up to continuousBacklog jobs
// waiting (inserting in batches) while the workers work, for cfg.Duration,
// and reports jobs worked per second.
func (e *riverEnv) continuous(ctx context.Context, cfg *runConfig) (*Result, error) {
	if err := e.client.Start(ctx); err != nil {
		return nil, fmt.Errorf("river: starting: %w", err)
	}
	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	start := time.Now()
	var inserted int64
	batch := make([]river.InsertManyParams, continuousBatch)
	for i := range batch {
		batch[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	var perr error
	for runCtx.Err() == nil {
		if inserted-e.state.done.Load() > continuousBacklog {
			time.Sleep(time.Millisecond)
			continue
		}
		if _, err := e.client.InsertManyFast(runCtx, batch); err != nil {
			if runCtx.Err() == nil {
				perr = fmt.Errorf("river: inserting: %w", err)
			}
			break
		}
		inserted += continuousBatch
	}
	worked := int(e.state.done.Load())
	elapsed := time.Since(start)
	if perr != nil {
		return nil, perr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := e.stopAndVerify(ctx, worked); err != nil {
		return nil, err
	}
	return &Result{Mode: "continuous", Jobs: worked, Elapsed: elapsed, JobsPerSec: float64(worked) / elapsed.Seconds()}, nil
}

// latency offers cfg.Rate jobs/s for cfg.Duration, one insert per job, each
// carrying its enqueue time, and reports the enqueue→start delays the
// worker measured.
func (e *riverEnv) latency(ctx context.Context, cfg *runConfig) (*Result, error) {
	if err := e.client.Start(ctx); err != nil {
		return nil, fmt.Errorf("river: starting: %w", err)
	}
	insert := func(ctx context.Context, stamp time.Time) error {
		_, err := e.client.Insert(ctx, noopArgs{Stamp: stamp.UnixNano()}, nil)
		return err
	}
	total, elapsed, err := offer(ctx, cfg, insert)
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	if err := waitWorked(ctx, e.state, total); err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	if err := e.stopAndVerify(ctx, total); err != nil {
		return nil, err
	}
	return latencyResult(total, elapsed, e.state.delays), nil
}
