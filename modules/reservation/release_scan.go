package reservation

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/keelwork/keel/keelsql"
)

// claimFunc claims candidates inside a release transaction.
type claimFunc func(ctx context.Context, q keelsql.Querier) ([]Candidate, error)

// releaseClaimed runs one release transaction: claim, then release. When
// the transaction fails after the claim (a dropped connection, a deadlock),
// nothing of it committed and every claimed candidate is reported failed so
// the caller retries it; when the claim itself fails, the error returns.
func (m *Module[TTx]) releaseClaimed(ctx context.Context, p *pass, claim claimFunc) ([]Candidate, *txOutcome, error) {
	var cands []Candidate
	var out *txOutcome
	err := m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		var err error
		if cands, err = claim(ctx, tx); err != nil || len(cands) == 0 {
			return err
		}
		out, err = m.releaseTx(ctx, tx, p, cands)
		return err
	})
	if err == nil {
		if out == nil {
			out = &txOutcome{}
		}
		return cands, out, nil
	}
	if len(cands) == 0 {
		return nil, nil, fmt.Errorf("claiming due reservations: %w", err)
	}
	out = &txOutcome{}
	for _, c := range cands {
		out.failed = append(out.failed, failure{c: c, err: fmt.Errorf("release transaction: %w", err)})
	}
	return cands, out, nil
}

// Scan runs one scan: for each category switched on, it claims due
// reservations in transactions of reservation.tx_size until
// reservation.page_size are claimed or none are due; categories in dry-run
// only have theirs logged. It then expires lapsed holds, retries the
// records that failed (with backoff) and hands those still failing to
// compensation. The run is recorded with its figures.
func (m *Module[TTx]) Scan(ctx context.Context) (*Run, error) {
	started := time.Now()
	p, err := m.newPass(ctx, "scan")
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	run := &Run{Kind: "scan", Instance: m.instance(), StartedAt: p.now}
	var failed []failure
	var errs []string
	budget := m.set.pageSize
	for _, id := range sortedCategories(p) {
		if budget <= 0 {
			break
		}
		switch p.cats[id].ReleaseMode {
		case ModeDryRun:
			if err := m.dryRun(ctx, p, id, budget, run); err != nil {
				errs = append(errs, err.Error())
			}
		case ModeOn:
			f, used, err := m.scanCategory(ctx, p, id, budget, run)
			failed, budget = append(failed, f...), budget-used
			if err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	if err := m.expireHolds(ctx, p, run); err != nil {
		errs = append(errs, err.Error())
	}
	m.settle(ctx, p, failed, run, &errs)
	return m.finishRun(ctx, run, started, errs)
}

// scanCategory claims one category's due reservations within budget.
func (m *Module[TTx]) scanCategory(ctx context.Context, p *pass, category string, budget int, run *Run) ([]failure, int, error) {
	var failed []failure
	var after Candidate // where the previous claim ended
	used := 0
	for used < budget {
		n := min(m.set.txSize, budget-used)
		cands, out, err := m.releaseClaimed(ctx, p, func(ctx context.Context, q keelsql.Querier) ([]Candidate, error) {
			return m.st.claimDue(ctx, q, category, p.now, n, after, m.commitMode())
		})
		if err != nil {
			return failed, used, err
		}
		used += len(cands)
		m.account(p, run, cands, out)
		failed = append(failed, out.failed...)
		if len(cands) > 0 {
			after = cands[len(cands)-1]
		}
		if len(cands) < n {
			break
		}
	}
	return failed, used, nil
}

// commitMode is the synchronous_commit of the scan's release transactions
// on PostgreSQL. With reservation.async_commit they do not wait for their
// WAL flush: a release lost to a server crash is due again and released by
// the next scan, and nothing of it leaves the database before a later
// synchronous commit has flushed the WAL past it: on the in-database bus,
// the events relay's publish of its notices and events, which consumers
// wait for. (With JetStream the relay publishes before it marks, so a
// notice of a release lost to a server crash can reach the notifier; keep
// async_commit off there.) See docs/reservation.md.
func (m *Module[TTx]) commitMode() string {
	if m.set.asyncCommit {
		return "off"
	}
	return "on"
}

// account adds one transaction's outcome to the run and the metrics.
func (m *Module[TTx]) account(p *pass, run *Run, cands []Candidate, out *txOutcome) {
	m.accountRetry(p, run, out)
	run.Scanned += len(cands)
	for _, c := range cands {
		if run.FirstID == 0 || c.ID < run.FirstID {
			run.FirstID = c.ID
		}
		run.LastID = max(run.LastID, c.ID)
	}
}

// accountRetry adds the outcome of a retry (of a record already counted as
// scanned) to the run and the metrics.
func (m *Module[TTx]) accountRetry(p *pass, run *Run, out *txOutcome) {
	run.Released += len(out.released)
	run.RestoreOK += out.restoreOK
	run.RestoreFailed += out.restoreFailed
	run.Promoted += out.promoted
	m.observe(p, out)
}

// settle retries the records that failed, in rounds after each backoff
// pause (so a run's total pause stays bounded however many fail); those
// still failing are marked for compensation (or dead-lettered).
func (m *Module[TTx]) settle(ctx context.Context, p *pass, failed []failure, run *Run, errs *[]string) {
	for _, pause := range m.opt.backoff {
		if len(failed) == 0 {
			break
		}
		if err := sleep(ctx, pause); err != nil {
			break
		}
		q := *p
		q.now = m.now()
		var still []failure
		for _, f := range failed {
			if last := m.retry(ctx, &q, f, run); last != nil {
				still = append(still, *last)
			}
		}
		failed = still
	}
	for _, f := range failed {
		run.Failed++
		m.met.failed.WithLabelValues(p.path).Inc()
		*errs = append(*errs, fmt.Sprintf("reservation %d: %v", f.c.ID, f.err))
		dead, err := m.markFailed(ctx, p, &f)
		if err != nil {
			*errs = append(*errs, err.Error())
		}
		if dead {
			run.DeadLettered++
		}
	}
}

// retry re-attempts one failed record; it returns its failure, or nil once
// it is released or no longer due for release (checked in, cancelled,
// released elsewhere).
func (m *Module[TTx]) retry(ctx context.Context, p *pass, f failure, run *Run) *failure {
	_, out, err := m.releaseClaimed(ctx, p, m.claimOne(p, f.c, true))
	if err != nil {
		return &failure{c: f.c, err: err}
	}
	m.accountRetry(p, run, out)
	if len(out.failed) == 0 {
		return nil
	}
	return &out.failed[0]
}

// claimOne claims one candidate at its version if it is still paid and due
// and its category releases.
func (m *Module[TTx]) claimOne(p *pass, c Candidate, failedBefore bool) claimFunc {
	return func(ctx context.Context, q keelsql.Querier) ([]Candidate, error) {
		cands, err := m.st.claimOne(ctx, q, c, p.now, failedBefore)
		if err != nil || len(cands) == 0 || p.mode(cands[0].CategoryID) != ModeOn {
			return nil, err
		}
		return cands, nil
	}
}

// dryRun logs what the scan would release in a dry-run category.
func (m *Module[TTx]) dryRun(ctx context.Context, p *pass, category string, limit int, run *Run) error {
	cands, err := m.st.dueDryRun(ctx, category, p.now, limit)
	if err != nil {
		return fmt.Errorf("dry run of %s: %w", category, err)
	}
	for _, c := range cands {
		m.log.Info("reservation: dry run: would release", "reservation", c.ID, "slot", c.SlotID,
			"user", c.UserID, "category", category, "due", c.Due)
	}
	run.DryRun += len(cands)
	m.met.dryRun.Add(float64(len(cands)))
	return nil
}

func (m *Module[TTx]) finishRun(ctx context.Context, run *Run, started time.Time, errs []string) (*Run, error) {
	elapsed := time.Since(started)
	run.FinishedAt = run.StartedAt.Add(elapsed)
	run.Errors = summarize(errs)
	m.met.runDuration.WithLabelValues(run.Kind).Observe(elapsed.Seconds())
	m.met.lastRun.WithLabelValues(run.Kind).Set(elapsed.Seconds())
	m.met.scanned.WithLabelValues(run.Kind).Add(float64(run.Scanned))
	if err := m.st.insertRun(ctx, run); err != nil {
		return run, fmt.Errorf("recording the %s run: %w", run.Kind, err)
	}
	if run.Failed > 0 || run.DeadLettered > 0 {
		if err := m.refreshDeadLetters(ctx); err != nil {
			return run, err
		}
	}
	m.log.Info("reservation: run finished", "kind", run.Kind, "run", run.ID, "scanned", run.Scanned,
		"released", run.Released, "failed", run.Failed, "promoted", run.Promoted, "holds_expired", run.HoldsExpired,
		"dry_run", run.DryRun, "first_id", run.FirstID, "last_id", run.LastID, "duration", elapsed, "errors", run.Errors)
	return run, nil
}

// summarize keeps a run's error summary short: the first few, and a count.
func summarize(errs []string) string {
	const keep = 5
	if len(errs) <= keep {
		return strings.Join(errs, "; ")
	}
	return strings.Join(errs[:keep], "; ") + fmt.Sprintf("; and %d more", len(errs)-keep)
}

func sortedCategories(p *pass) []string {
	ids := make([]string, 0, len(p.cats))
	for id := range p.cats {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
