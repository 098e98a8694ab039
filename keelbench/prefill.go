package keelbench

import (
	"context"
	"fmt"

	"github.com/keelwork/keel/keeldriver"
)

// prefillSQL fills the table with completed jobs in one set-based statement
// per dialect. It writes rows directly (not through claim and finish) so
// that millions can be made in seconds; they carry every column a finished
// job has, which is all that matters to the claim path being measured.
var prefillSQL = map[string]string{
	"postgres": `INSERT INTO keel_job (kind, queue, args, state, attempt, fence, run_at, created_at, attempted_at, finalized_at)
SELECT 'bench.finished', 'default', '{}', 'completed', 1, 1, now(), now(), now(), now()
FROM generate_series(1, $1)`,
	"sqlite": `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
INSERT INTO keel_job (kind, queue, args, state, attempt, fence, run_at, created_at, attempted_at, finalized_at)
SELECT 'bench.finished', 'default', '{}', 'completed', 1, 1, t, t, t, t
FROM n, (SELECT CAST(unixepoch('subsec') * 1000000 AS INTEGER) AS t)`,
}

func prefillFinished[TTx any](ctx context.Context, d keeldriver.Driver[TTx], c *Config) error {
	stmt, ok := prefillSQL[d.Dialect()]
	if !ok {
		return fmt.Errorf("prefill: no statement for dialect %q", d.Dialect())
	}
	const chunk = 500000
	for done := 0; done < c.FinishedRows; done += chunk {
		if err := d.Executor().Exec(ctx, stmt, min(chunk, c.FinishedRows-done)); err != nil {
			return fmt.Errorf("prefill: %w", err)
		}
		c.Logger.Info("prefilled finished rows", "done", min(done+chunk, c.FinishedRows), "of", c.FinishedRows)
	}
	return nil
}
