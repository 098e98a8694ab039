package keel_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/internal/testwait"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// both runs body against a fresh PostgreSQL schema and a fresh SQLite file:
// the engine's conformance across drivers.
func both(t *testing.T, pg func(*testing.T, keeldriver.Driver[pgx.Tx]), lite func(*testing.T, keeldriver.Driver[*sql.Tx])) {
	t.Helper()
	testdb.Run(t, pg, lite)
}

// fastConfig shortens every interval so tests converge in milliseconds.
func fastConfig(workers *keel.Workers) *keel.Config {
	return &keel.Config{
		Workers:                workers,
		Queues:                 map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 10}},
		LeaseDuration:          2 * time.Second,
		FetchPollInterval:      50 * time.Millisecond,
		PromoteInterval:        10 * time.Millisecond,
		RescueInterval:         20 * time.Millisecond,
		LeaderTTL:              600 * time.Millisecond,
		RetryPolicy:            &keel.JitterRetryPolicy{Base: time.Millisecond, Cap: 5 * time.Millisecond},
		Logger:                 slog.New(slog.NewTextHandler(io.Discard, nil)),
		CompleterFlushInterval: time.Millisecond,
	}
}

func startClient[TTx any](t *testing.T, d keeldriver.Driver[TTx], cfg *keel.Config) *keel.Client[TTx] {
	t.Helper()
	c, err := keel.NewClient(d, cfg)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	if cfg.Workers == nil && cfg.Queues == nil {
		return c
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.StopAndCancel(ctx)
	})
	return c
}

// waitFor polls cond until it holds or the deadline passes. It waits on a
// condition of the system under test, never for a fixed time.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, within, what, cond)
}

func jobState[TTx any](t *testing.T, c *keel.Client[TTx], id int64) *keeltype.JobRow {
	t.Helper()
	row, err := c.JobGet(context.Background(), id)
	if err != nil {
		t.Fatalf("get job %d: %v", id, err)
	}
	return row
}

func waitState[TTx any](t *testing.T, c *keel.Client[TTx], id int64, want keeltype.JobState) *keeltype.JobRow {
	t.Helper()
	var row *keeltype.JobRow
	waitFor(t, 10*time.Second, "job to become "+string(want), func() bool {
		row = jobState(t, c, id)
		return row.State == want
	})
	return row
}

type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return "test.noop" }
