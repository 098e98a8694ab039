package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelwork/keel/keelpgx"
)

const (
	// insertBatch is the batch size of drain's up-front insert.
	insertBatch = 5000
	// continuousBatch and continuousBacklog shape the continuous producer
	// as keelbench does: it inserts batches of continuousBatch while no more
	// than continuousBacklog jobs wait.
	continuousBatch   = 1000
	continuousBacklog = 20000
	// latencyInserters is how many goroutines share the latency mode's
	// one-job inserts, so a slow commit does not hold back the offered rate.
	latencyInserters = 16
	// finishTimeout bounds the wait for jobs already inserted to be worked
	// once a latency run stops offering.
	finishTimeout = 60 * time.Second
)

// runConfig is the shape of one run, shared by both engines.
type runConfig struct {
	DatabaseURL string
	Mode        string
	N           int
	Duration    time.Duration
	Rate        int
	Workers     int
	Logger      *slog.Logger
	// Causes receives Keel's latency breakdown (--keel-causes); nil: none.
	Causes io.Writer
	// KeelInsertRows makes Keel's drain and continuous insert with
	// InsertMany (every stored job returned) instead of InsertManyFast
	// (--keel-insert-rows).
	KeelInsertRows bool
	// KeelStartOnInsert is Keel's default (--keel-start-on-insert): latency
	// runs start each job on the inserting client, claimed by its insert.
	// False sets Config.DisableStartOnInsert.
	KeelStartOnInsert bool
}

func (c *runConfig) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c.Logger
}

// Result is one run's figures, for either engine.
type Result struct {
	Mode       string
	Jobs       int
	Elapsed    time.Duration
	JobsPerSec float64
	P50        time.Duration
	P90        time.Duration
	P99        time.Duration
	Max        time.Duration
}

func (r *Result) String() string {
	if r.Mode == "latency" {
		return fmt.Sprintf("latency: %d jobs at %.0f jobs/s offered, enqueue→start p50 %s, p90 %s, p99 %s, max %s",
			r.Jobs, r.JobsPerSec, fmtMS(r.P50), fmtMS(r.P90), fmtMS(r.P99), fmtMS(r.Max))
	}
	return fmt.Sprintf("%s: %d jobs in %.2fs, %.0f jobs/s", r.Mode, r.Jobs, r.Elapsed.Seconds(), r.JobsPerSec)
}

func fmtMS(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// openPool opens a pgx pool sized like Keel's: keelpgx.DefaultMaxConns
// unless the URL sets pool_max_conns.
func openPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parsing database url: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = keelpgx.DefaultMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("creating pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting: %w", err)
	}
	return pool, nil
}

func randHex() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// offer calls insert cfg.Rate times a second for cfg.Duration: job i is due
// at start + i/Rate and handed to one of latencyInserters goroutines, which
// passes the time it begins the insert as the job's enqueue stamp. It
// returns how many jobs were inserted and how long offering took.
func offer(ctx context.Context, cfg *runConfig, insert func(context.Context, time.Time) error) (int, time.Duration, error) {
	period := time.Second / time.Duration(cfg.Rate)
	total := int(cfg.Duration / period)
	due := make(chan struct{}, 4096)
	errc := make(chan error, latencyInserters)
	var wg sync.WaitGroup
	for range latencyInserters {
		wg.Go(func() {
			for range due {
				if err := insert(ctx, time.Now()); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	start := time.Now()
	var err error
	sent := 0
loop:
	for ; sent < total; sent++ {
		if wait := time.Until(start.Add(time.Duration(sent) * period)); wait > 0 {
			time.Sleep(wait)
		}
		select {
		case due <- struct{}{}:
		case err = <-errc:
			break loop
		case <-ctx.Done():
			err = ctx.Err()
			break loop
		}
	}
	close(due)
	wg.Wait()
	elapsed := time.Since(start)
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("offering: %w", err)
	}
	return total, elapsed, nil
}

// waitWorked waits (bounded by finishTimeout) until state has counted n
// worked jobs.
func waitWorked(ctx context.Context, state *runState, n int) error {
	deadline := time.Now().Add(finishTimeout)
	for state.done.Load() < int64(n) {
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d offered jobs worked after %s", state.done.Load(), n, finishTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// latencyResult summarises a latency run's delays.
func latencyResult(total int, elapsed time.Duration, delays []time.Duration) *Result {
	s := slices.Clone(delays)
	slices.Sort(s)
	return &Result{
		Mode: "latency", Jobs: total, Elapsed: elapsed,
		JobsPerSec: float64(total) / elapsed.Seconds(),
		P50:        quantile(s, 0.50), P90: quantile(s, 0.90), P99: quantile(s, 0.99), Max: quantile(s, 1),
	}
}

// quantile is the nearest-rank q-quantile of sorted s (0 when empty).
func quantile(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// median of xs (0 when empty); xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
