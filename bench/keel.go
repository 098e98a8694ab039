package main

import (
	"context"

	"github.com/keelwork/keel/keelbench"
)

// runKeel performs one Keel run with the shape in cfg through keelbench, the
// same code `keel bench` runs, on a fresh schema of cfg.DatabaseURL.
func runKeel(ctx context.Context, cfg *runConfig) (*Result, error) {
	r, err := keelbench.Run(ctx, &keelbench.Config{
		DatabaseURL: cfg.DatabaseURL,
		Mode:        cfg.Mode,
		N:           cfg.N,
		Duration:    cfg.Duration,
		Rate:        cfg.Rate,
		Workers:     cfg.Workers,
		Logger:      cfg.Logger,
		Causes:      cfg.Causes,
		InsertRows:  cfg.KeelInsertRows,

		DisableStartOnInsert: !cfg.KeelStartOnInsert,
	})
	if err != nil {
		return nil, err
	}
	return &Result{
		Mode: r.Mode, Jobs: r.Jobs, Elapsed: r.Elapsed, JobsPerSec: r.JobsPerSec,
		P50: r.P50, P90: r.P90, P99: r.P99, Max: r.Max,
	}, nil
}
