// Package keelbench measures the engine: drain (insert N no-op jobs, then
// work them down), continuous (insert and work for a duration) and latency
// (enqueue→start delay at a fixed offered rate). `keel bench` and the peers
// comparison under bench/ both run it, so their figures are comparable.
package keelbench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/keelwork/keel/keelsql"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsqlite"
)

// Config describes one run.
type Config struct {
	// DatabaseURL is postgres://… (a fresh schema is created and dropped) or
	// sqlite:PATH / a file path (a fresh file is used when PATH is empty).
	DatabaseURL string
	// Mode is drain, continuous or latency.
	Mode string
	// N is the number of jobs for drain.
	N int
	// Duration of continuous and latency runs.
	Duration time.Duration
	// Rate is the offered jobs/s of a latency run.
	Rate int
	// Workers is the queue's MaxWorkers.
	Workers int
	// FlowKeys spreads jobs over this many flow keys (0 = none).
	FlowKeys int
	// FinishedRows pre-fills the table with this many completed jobs, to
	// show that finished rows do not slow claiming.
	FinishedRows int
	// Logger for progress; nil discards.
	Logger *slog.Logger
	// ClaimStats, if set, receives the count and duration of claim
	// statements after drain, continuous and latency runs.
	ClaimStats io.Writer
	// InsertRows makes drain and continuous insert with InsertMany, which
	// returns every stored job, instead of InsertManyFast (the bulk path,
	// COPY on PostgreSQL, which River's InsertManyFast matches).
	InsertRows bool
	// DisableStartOnInsert sets keel.Config.DisableStartOnInsert: every
	// job is inserted available and claimed afterwards, two flushed
	// commits per job (the default starts a job inserted into an idle
	// queue on the inserting client, claimed by its insert).
	DisableStartOnInsert bool
	// Causes, if set, receives a latency run's breakdown of enqueue→start
	// delays by segment and what the tail was made of (see causes.go).
	Causes io.Writer
}

// Result is one run's figures.
type Result struct {
	Mode       string
	Driver     string
	Jobs       int
	Elapsed    time.Duration
	JobsPerSec float64
	P50        time.Duration
	P90        time.Duration
	P99        time.Duration
	Max        time.Duration
}

// String is the one-line summary, e.g. "drain: 200000 jobs in 6.1s, 32787 jobs/s".
func (r *Result) String() string {
	switch r.Mode {
	case "latency":
		return fmt.Sprintf("latency: %d jobs at %.0f jobs/s offered, enqueue→start p50 %s, p90 %s, p99 %s, max %s",
			r.Jobs, r.JobsPerSec, ms(r.P50), ms(r.P90), ms(r.P99), ms(r.Max))
	default:
		return fmt.Sprintf("%s: %d jobs in %.2fs, %.0f jobs/s", r.Mode, r.Jobs, r.Elapsed.Seconds(), r.JobsPerSec)
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func (c *Config) validate() error {
	switch {
	case c.DatabaseURL == "":
		return errors.New("keelbench: a database URL is required")
	case c.Mode != "drain" && c.Mode != "continuous" && c.Mode != "latency":
		return fmt.Errorf("keelbench: mode %q is not drain, continuous or latency", c.Mode)
	case c.Mode == "drain" && c.N < 1:
		return errors.New("keelbench: drain needs -n ≥ 1")
	case c.Mode != "drain" && c.Duration <= 0:
		return errors.New("keelbench: continuous and latency need a positive --duration")
	case c.Mode == "latency" && c.Rate < 1:
		return errors.New("keelbench: latency needs --rate ≥ 1")
	case c.Workers < 1:
		return errors.New("keelbench: --workers must be ≥ 1")
	}
	return nil
}

// Run performs one benchmark run on a fresh schema or file.
func Run(ctx context.Context, cfg *Config) (*Result, error) {
	c := *cfg
	if c.Workers == 0 {
		c.Workers = 100
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	if strings.HasPrefix(c.DatabaseURL, "postgres://") || strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		return runPostgres(ctx, &c)
	}
	return runSQLite(ctx, &c)
}

func runPostgres(ctx context.Context, c *Config) (*Result, error) {
	schema := "keel_bench_" + randHex()
	admin, err := pgx.Connect(ctx, keelsql.SingleConnURL(c.DatabaseURL))
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, fmt.Errorf("creating schema: %w", err)
	}
	defer func() { _, _ = admin.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+schema+" CASCADE") }()
	d, err := keelpgx.Open(ctx, c.DatabaseURL, &keelpgx.Config{Schema: schema})
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if err := migrate(ctx, d); err != nil {
		return nil, err
	}
	res, err := run(ctx, d, c)
	if res != nil {
		res.Driver = "postgres"
	}
	return res, err
}

func runSQLite(ctx context.Context, c *Config) (*Result, error) {
	path := strings.TrimPrefix(c.DatabaseURL, "sqlite:")
	if path == "" || path == "temp" {
		dir, err := os.MkdirTemp("", "keel-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "bench.db")
	}
	d, err := keelsqlite.Open(path, nil)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if err := migrate(ctx, d); err != nil {
		return nil, err
	}
	res, err := run(ctx, d, c)
	if res != nil {
		res.Driver = "sqlite"
	}
	return res, err
}

func migrate[TTx any](ctx context.Context, d keeldriver.Driver[TTx]) error {
	m, err := keelmigrate.New[TTx](d, nil)
	if err != nil {
		return err
	}
	_, err = m.Up(ctx, nil)
	return err
}

func randHex() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
