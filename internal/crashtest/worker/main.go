// Command worker is one worker process of the crash test (see package
// crashtest). It works crash.effect jobs from a PostgreSQL schema until it
// receives SIGTERM or SIGINT (hard stop: StopAndCancel) or is killed.
//
// It prints "ready <pid>" on stdout once its client has started, so that the
// controller synchronizes on it instead of sleeping, and "stopped <pid>" after
// a clean stop. Logs go to stderr.
//
//	worker -url postgres://... -schema keel_t_xxx [-workers 10] [-work 200ms] [-lease 1s]
//
// The URL and schema may also come from KEEL_CRASH_URL and KEEL_CRASH_SCHEMA.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/crashtest"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keeltype"
)

// dbTimeout bounds each of the worker's own statements. They run detached
// from the job's context on purpose (see Work).
const dbTimeout = 10 * time.Second

func main() {
	var o options
	flag.StringVar(&o.url, "url", os.Getenv("KEEL_CRASH_URL"), "PostgreSQL URL (env KEEL_CRASH_URL)")
	flag.StringVar(&o.schema, "schema", os.Getenv("KEEL_CRASH_SCHEMA"), "schema holding Keel's and the crash test's tables (env KEEL_CRASH_SCHEMA)")
	flag.IntVar(&o.workers, "workers", 10, "jobs run at once (MaxWorkers of the default queue)")
	flag.DurationVar(&o.work, "work", 20*time.Millisecond, "each job sleeps a uniformly random duration in [0, work) before its effect")
	flag.DurationVar(&o.lease, "lease", time.Second, "lease duration")
	flag.Parse()
	if o.url == "" || o.schema == "" {
		fmt.Fprintln(os.Stderr, "worker: -url and -schema are required")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

type options struct {
	url, schema string
	workers     int
	work, lease time.Duration
}

func run(o options) error {
	ctx := context.Background()
	pid := os.Getpid()
	// Signals are subscribed before Start so that a SIGTERM arriving right
	// after "ready" is a clean stop, not the default abrupt exit.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	d, err := keelpgx.Open(ctx, o.url, &keelpgx.Config{Schema: o.schema})
	if err != nil {
		return err
	}
	defer d.Close()

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	w := &effectWorker{d: d, pid: pid, maxWork: o.work, logger: logger}
	ws := keel.NewWorkers()
	keel.AddWorker[crashtest.EffectArgs](ws, w)
	client, err := keel.NewClient[pgx.Tx](d, &keel.Config{
		ID:                fmt.Sprintf("crash-%d", pid),
		Queues:            map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: o.workers}},
		Workers:           ws,
		LeaseDuration:     o.lease,
		FetchPollInterval: 100 * time.Millisecond,
		LeaderTTL:         time.Second,
		PromoteInterval:   100 * time.Millisecond,
		RescueInterval:    100 * time.Millisecond,
		StopHandBack:      5 * time.Second,
		Logger:            logger,
	})
	if err != nil {
		return err
	}
	w.client = client // before Start: no job runs yet

	if err := client.Start(ctx); err != nil {
		return err
	}
	flushCtx, stopFlush := context.WithCancel(ctx)
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		flushLoop(flushCtx, d, client, pid)
	}()
	fmt.Printf("ready %d\n", pid)

	sig := <-sigs
	logger.Warn("stopping", "signal", sig.String())
	stopCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	stopErr := client.StopAndCancel(stopCtx)
	stopFlush()
	<-flushed
	if err := flushMetrics(stopCtx, d, client, pid); err != nil {
		logger.Error("final metrics flush", "error", err)
	}
	if stopErr != nil {
		return fmt.Errorf("stopping: %w", stopErr)
	}
	fmt.Printf("stopped %d\n", pid)
	return nil
}

// effectWorker writes the external effect of a job, keyed by (job id, fence).
//
// Its database work runs on a context detached from the job's: a worker that
// ignores the lease-lost signal (or is frozen past its lease, so the signal
// comes too late) is exactly what the fence must stop, and the test wants
// those late commits to reach the database and be rejected there.
type effectWorker struct {
	d       *keelpgx.Driver
	client  *keel.Client[pgx.Tx]
	pid     int
	maxWork time.Duration
	logger  *slog.Logger
}

func (w *effectWorker) Work(ctx context.Context, job *keel.Job[crashtest.EffectArgs]) error {
	if w.maxWork > 0 {
		time.Sleep(rand.N(w.maxWork)) // simulated work; a frozen process stops here
	}
	dbCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dbTimeout)
	defer cancel()
	if job.Args.Plain {
		return w.plain(dbCtx, job)
	}
	return w.transactional(dbCtx, job)
}

// plain is at-least-once: the effect commits on its own, then the job
// completes through the batched completer. If the process dies or loses the
// lease in between, the job runs again under a higher fence and writes a
// second effect row; the one with the job's final fence is the effective one,
// the others are superseded attempts. That is what at-least-once means, and
// why the fence is handed to the external system.
func (w *effectWorker) plain(ctx context.Context, job *keel.Job[crashtest.EffectArgs]) error {
	if _, err := w.d.Pool().Exec(ctx, insertEffect, job.ID, job.Fence, w.pid, crashtest.PathPlain); err != nil {
		w.anomaly(job, "plain effect insert: "+err.Error())
		return err
	}
	return keel.RecordResult(ctx, crashtest.EffectResult{PID: w.pid, Fence: job.Fence, Path: crashtest.PathPlain})
}

// transactional writes the effect and completes the job in one transaction:
// commit only if CompleteTx accepted the fence; on a stale fence roll back
// (the effect vanishes with it) and record the rejection.
func (w *effectWorker) transactional(ctx context.Context, job *keel.Job[crashtest.EffectArgs]) error {
	etx, err := w.d.Executor().Begin(ctx)
	if err != nil {
		w.anomaly(job, "begin: "+err.Error())
		return err
	}
	tx := w.d.UnwrapTx(etx)
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // no-op after Commit

	if _, err := tx.Exec(ctx, insertEffect, job.ID, job.Fence, w.pid, crashtest.PathCompleteTx); err != nil {
		w.anomaly(job, "effect insert: "+err.Error())
		return err
	}
	err = w.client.CompleteTx(ctx, tx, job, crashtest.EffectResult{PID: w.pid, Fence: job.Fence, Path: crashtest.PathCompleteTx})
	var stale *keeltype.StaleFenceError
	switch {
	case errors.As(err, &stale):
		if rbErr := tx.Rollback(ctx); rbErr != nil {
			w.anomaly(job, "rollback after stale fence: "+rbErr.Error())
			return rbErr
		}
		if _, rerr := w.d.Pool().Exec(ctx, insertStale, job.ID, job.Fence, stale.CurrentFence,
			string(stale.CurrentState), w.pid); rerr != nil {
			w.anomaly(job, "recording stale rejection: "+rerr.Error())
		}
		return err
	case err != nil:
		w.anomaly(job, "CompleteTx: "+err.Error())
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		w.anomaly(job, "commit: "+err.Error())
		return err
	}
	return nil
}

const (
	insertEffect = `INSERT INTO crash_effect (job_id, fence, worker_pid, path) VALUES ($1, $2, $3, $4)`
	insertStale  = `INSERT INTO crash_stale (job_id, fence, current_fence, current_state, worker_pid)
VALUES ($1, $2, $3, $4, $5)`
	insertAnomaly = `INSERT INTO crash_anomaly (job_id, fence, worker_pid, what) VALUES ($1, $2, $3, $4)`
	upsertProc    = `INSERT INTO crash_proc (pid, client_id, stale_rejected, leases_lost, leases_expired, completed)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (pid) DO UPDATE SET stale_rejected = EXCLUDED.stale_rejected, leases_lost = EXCLUDED.leases_lost,
    leases_expired = EXCLUDED.leases_expired, completed = EXCLUDED.completed, updated_at = clock_timestamp()`
)

// anomaly records something the test must fail on, in the database (the
// process may be killed any moment) and in the log.
func (w *effectWorker) anomaly(job *keel.Job[crashtest.EffectArgs], what string) {
	w.logger.Error("crash test anomaly", "job_id", job.ID, "fence", job.Fence, "what", what)
	ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
	defer cancel()
	if _, err := w.d.Pool().Exec(ctx, insertAnomaly, job.ID, job.Fence, w.pid, what); err != nil {
		w.logger.Error("recording anomaly", "error", err)
	}
}

// flushLoop writes the client's counters every 200 ms until ctx ends.
func flushLoop(ctx context.Context, d *keelpgx.Driver, c *keel.Client[pgx.Tx], pid int) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = flushMetrics(ctx, d, c, pid)
		}
	}
}

func flushMetrics(ctx context.Context, d *keelpgx.Driver, c *keel.Client[pgx.Tx], pid int) error {
	m := c.Metrics()
	_, err := d.Pool().Exec(ctx, upsertProc, pid, c.ID(),
		int64(sum(m.StaleFence)), int64(sum(m.LeaseLost)), int64(sum(m.LeaseExpired)), int64(sum(m.Completed)))
	return err
}

// sum adds up every counter a collector reports (all label values).
func sum(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 16)
	go func() { c.Collect(ch); close(ch) }()
	total := 0.0
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err == nil && pb.Counter != nil {
			total += pb.Counter.GetValue()
		}
	}
	return total
}
