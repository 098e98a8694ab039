package keelbench

import (
	"context"
	"fmt"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// prefillFinished fills the table with completed jobs through the engine's
// own statements (insert, claim, finish), so the rows look exactly like
// finished work.
func prefillFinished[TTx any](ctx context.Context, d keeldriver.Driver[TTx], c *Config) error {
	ex := d.Executor()
	const chunk = 10000
	for done := 0; done < c.FinishedRows; done += chunk {
		n := min(chunk, c.FinishedRows-done)
		params := make([]*keeldriver.JobInsertParams, n)
		for i := range params {
			params[i] = &keeldriver.JobInsertParams{Kind: "bench.finished", Queue: "prefill", Args: []byte(`{}`), MaxAttempts: 1}
		}
		if _, err := ex.JobInsertMany(ctx, params); err != nil {
			return fmt.Errorf("prefill insert: %w", err)
		}
		rows, err := ex.JobClaim(ctx, &keeldriver.JobClaimParams{Queue: "prefill", Owner: "prefill", Max: n, LeaseDuration: time.Minute})
		if err != nil {
			return fmt.Errorf("prefill claim: %w", err)
		}
		fin := make([]*keeldriver.JobFinishParams, len(rows))
		for i, r := range rows {
			fin[i] = &keeldriver.JobFinishParams{ID: r.ID, Fence: r.Fence, State: keeltype.JobStateCompleted}
		}
		if _, err := ex.JobFinishMany(ctx, fin); err != nil {
			return fmt.Errorf("prefill finish: %w", err)
		}
		if done%500000 == 0 {
			c.Logger.Info("prefilling finished rows", "done", done, "of", c.FinishedRows)
		}
	}
	return ex.Exec(ctx, "ANALYZE keel_job")
}
