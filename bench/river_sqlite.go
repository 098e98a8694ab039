package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite" // the same pure-Go SQLite Keel's driver uses
)

// sqliteDrain is the mode that drains on SQLite: Keel's SQLite driver
// against River's riversqlite, each on a fresh file.
const sqliteDrain = "sqlite-drain"

// runKeelSQLite drains cfg.N jobs through keelbench on a fresh SQLite file.
func runKeelSQLite(ctx context.Context, cfg *runConfig) (*Result, error) {
	c := *cfg
	c.Mode, c.DatabaseURL = "drain", "sqlite:"
	r, err := runKeel(ctx, &c)
	if err != nil {
		return nil, err
	}
	r.Mode = sqliteDrain
	return r, nil
}

// openRiverSQLite opens a fresh SQLite file the way River's driver asks
// (one connection, so its parallel maintenance never meets SQLITE_BUSY) with
// the durability Keel's SQLite driver uses: WAL, synchronous=NORMAL.
func openRiverSQLite(dir string) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "river.db")+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("river sqlite: opening: %w", err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// runRiverSQLite inserts cfg.N no-op jobs into a fresh SQLite file (not
// timed), then times River's client from start until all N ran and its
// completions are committed (stop included, as on PostgreSQL).
func runRiverSQLite(ctx context.Context, cfg *runConfig, tuning riverTuning) (res *Result, err error) {
	dir, err := os.MkdirTemp("", "river-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	db, err := openRiverSQLite(dir)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	driver := riversqlite.New(db)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: cfg.logger()})
	if err != nil {
		return nil, fmt.Errorf("river sqlite: migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("river sqlite: migrating: %w", err)
	}
	state := newRunState(cfg.N)
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{state: state})
	client, err := river.NewClient(driver, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers}},
		Workers:           workers,
		FetchCooldown:     tuning.FetchCooldown,
		FetchPollInterval: tuning.FetchPollInterval,
		Logger:            cfg.logger(),
	})
	if err != nil {
		return nil, fmt.Errorf("river sqlite: client: %w", err)
	}
	batch := make([]river.InsertManyParams, 0, insertBatch)
	for left := cfg.N; left > 0; {
		k := min(left, insertBatch)
		batch = batch[:0]
		for range k {
			batch = append(batch, river.InsertManyParams{Args: noopArgs{}})
		}
		if _, err := client.InsertManyFast(ctx, batch); err != nil {
			return nil, fmt.Errorf("river sqlite: inserting: %w", err)
		}
		left -= k
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return nil, fmt.Errorf("river sqlite: starting: %w", err)
	}
	select {
	case <-state.reached:
	case <-ctx.Done():
		_ = client.Stop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("river sqlite: drain: %d of %d jobs worked: %w", state.done.Load(), cfg.N, ctx.Err())
	}
	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil && !errors.Is(err, context.Canceled) {
		return nil, fmt.Errorf("river sqlite: stopping: %w", err)
	}
	elapsed := time.Since(start)
	var completed int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&completed); err != nil {
		return nil, fmt.Errorf("river sqlite: counting completed: %w", err)
	}
	if completed < cfg.N {
		return nil, fmt.Errorf("river sqlite: %d jobs worked but only %d completed in river_job", cfg.N, completed)
	}
	return &Result{Mode: sqliteDrain, Jobs: cfg.N, Elapsed: elapsed, JobsPerSec: float64(cfg.N) / elapsed.Seconds()}, nil
}
