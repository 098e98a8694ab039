package reservation

import (
	"context"
	"fmt"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
)

// Job kinds of the module.
const (
	KindScan       = "reservation.scan"
	KindCompensate = "reservation.compensate"
	KindRelease    = "reservation.release"
	KindNotify     = "reservation.notify"
	KindRelay      = "reservation.relay"
)

// releaseMaxAttempts bounds the precise job: the scan is its fallback.
const releaseMaxAttempts = 3

// ScanArgs starts one scan run: a periodic tick, or the continuation of a
// run that filled its page.
type ScanArgs struct {
	After int64 `json:"after,omitempty"` // the run this one continues
}

// Kind implements keel.JobArgs.
func (ScanArgs) Kind() string { return KindScan }

// CompensateArgs starts one compensation run.
type CompensateArgs struct{}

// Kind implements keel.JobArgs.
func (CompensateArgs) Kind() string { return KindCompensate }

// ReleaseArgs is the precise release of one reservation at one version.
type ReleaseArgs struct {
	ReservationID int64 `json:"reservation_id"`
	Version       int64 `json:"version"`
}

// Kind implements keel.JobArgs.
func (ReleaseArgs) Kind() string { return KindRelease }

// NotifyArgs emits the event of a notice due later (a reminder) when it is
// due; the notifier consumer delivers it.
type NotifyArgs struct {
	OutboxID int64 `json:"outbox_id"`
}

// Kind implements keel.JobArgs.
func (NotifyArgs) Kind() string { return KindNotify }

// RelayArgs hands over notices left from before notifications moved to
// the events outbox (see handOverLeftovers).
type RelayArgs struct{}

// Kind implements keel.JobArgs.
func (RelayArgs) Kind() string { return KindRelay }

// Configure registers the module's workers, its queue and its periodic
// jobs (the scan every reservation.scan_interval, compensation every
// reservation.compensation_interval).
func (m *Module[TTx]) Configure(cfg *keel.Config) error {
	if cfg.Workers == nil {
		cfg.Workers = keel.NewWorkers()
	}
	if cfg.Queues == nil {
		cfg.Queues = map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: keel.DefaultMaxWorkers}}
	}
	if _, ok := cfg.Queues[m.set.queue]; !ok {
		cfg.Queues[m.set.queue] = keel.QueueConfig{MaxWorkers: m.set.workers}
	}
	for _, err := range []error{
		keel.AddWorkerSafely[ScanArgs](cfg.Workers, keel.WorkerFunc[ScanArgs](m.workScan)),
		keel.AddWorkerSafely[CompensateArgs](cfg.Workers, keel.WorkerFunc[CompensateArgs](m.workCompensate)),
		keel.AddWorkerSafely[ReleaseArgs](cfg.Workers, keel.WorkerFunc[ReleaseArgs](m.workRelease)),
		keel.AddWorkerSafely[NotifyArgs](cfg.Workers, keel.WorkerFunc[NotifyArgs](m.workNotify)),
		keel.AddWorkerSafely[RelayArgs](cfg.Workers, keel.WorkerFunc[RelayArgs](m.workRelay)),
	} {
		if err != nil {
			return fmt.Errorf("reservation: %w", err)
		}
	}
	queue := m.set.queue
	cfg.PeriodicJobs = append(cfg.PeriodicJobs,
		&keel.PeriodicJob{Name: KindScan, Schedule: keel.Every(m.set.scanInterval),
			Construct: func(time.Time) (keel.JobArgs, *keel.InsertOpts) {
				return ScanArgs{}, &keel.InsertOpts{Queue: queue, MaxAttempts: 3}
			}},
		&keel.PeriodicJob{Name: KindCompensate, Schedule: keel.Every(m.set.compensationInterval),
			Construct: func(time.Time) (keel.JobArgs, *keel.InsertOpts) {
				return CompensateArgs{}, &keel.InsertOpts{Queue: queue, MaxAttempts: 3}
			}},
	)
	return nil
}

// bind keeps the client running this job when Start has not run yet (jobs
// may be claimed before the host starts its modules).
func (m *Module[TTx]) bind(ctx context.Context) {
	if m.client.Load() != nil {
		return
	}
	if c, err := keel.ClientFromContext[TTx](ctx); err == nil {
		_ = m.client.Bind(c) // a client bound meanwhile wins; this job runs on it either way
	}
}

func (m *Module[TTx]) workScan(ctx context.Context, job *keel.Job[ScanArgs]) error {
	m.bind(ctx)
	run, err := m.Scan(ctx)
	if err != nil {
		return err
	}
	if run.Scanned+run.HoldsExpired < m.set.pageSize {
		return nil
	}
	// The page was full: more may be due. Continue now rather than at the
	// next tick; the key makes a retried job continue only once.
	client, err := m.engine()
	if err != nil {
		return err
	}
	_, err = client.Insert(ctx, ScanArgs{After: run.ID}, &keel.InsertOpts{Queue: m.set.queue, MaxAttempts: 3,
		IdempotencyKey: fmt.Sprintf("scan:after:%d", run.ID)})
	return err
}

func (m *Module[TTx]) workCompensate(ctx context.Context, job *keel.Job[CompensateArgs]) error {
	m.bind(ctx)
	_, err := m.Compensate(ctx)
	return err
}

// workRelease is the precise path: release one reservation at its release
// point if it is still paid at the version the job was queued for. A stale
// version (moved, checked in, cancelled, released by the scan) ends the job
// quietly; a job that runs early snoozes; a failure is left to the scan.
func (m *Module[TTx]) workRelease(ctx context.Context, job *keel.Job[ReleaseArgs]) error {
	m.bind(ctx)
	p, err := m.newPass(ctx, "precise")
	if err != nil {
		return err
	}
	c := Candidate{ID: job.Args.ReservationID, Version: job.Args.Version}
	cands, out, err := m.releaseClaimed(ctx, p, m.claimOne(p, c, false))
	if err != nil {
		return err
	}
	m.observe(p, out)
	if len(out.failed) > 0 {
		m.met.failed.WithLabelValues(p.path).Inc()
		m.log.Warn("reservation: precise release failed; the scan will retry", "reservation", c.ID, "error", out.failed[0].err)
		return keel.RecordResult(ctx, map[string]any{"outcome": "failed", "error": out.failed[0].err.Error()})
	}
	if len(cands) == 1 {
		return keel.RecordResult(ctx, map[string]any{"outcome": "released"})
	}
	return m.notReleased(ctx, p, c)
}

// notReleased decides what a precise job that claimed nothing does: snooze
// until the release point if it has not come, otherwise finish.
func (m *Module[TTx]) notReleased(ctx context.Context, p *pass, c Candidate) error {
	r, err := m.Reservation(ctx, c.ID)
	if err != nil {
		return err
	}
	if r.State == StatePaid && r.Version == c.Version && r.ExpectedReleaseAt != nil && r.ExpectedReleaseAt.After(p.now) {
		return keel.JobSnooze(r.ExpectedReleaseAt.Sub(p.now))
	}
	outcome := "not_due"
	switch {
	case r.State != StatePaid || r.Version != c.Version:
		outcome = "stale"
	case p.mode(r.CategoryID) != ModeOn:
		outcome = "category_" + string(p.mode(r.CategoryID))
	case r.RetryCount > 0:
		outcome = "left_to_compensation"
	}
	return keel.RecordResult(ctx, map[string]any{"outcome": outcome, "state": r.State, "version": r.Version})
}

// assist releases one slot's due reservations (one transaction's worth)
// when its availability is read. Failures are left to the scan.
func (m *Module[TTx]) assist(ctx context.Context, slot int64) error {
	if m.client.Load() == nil {
		return nil
	}
	p, err := m.newPass(ctx, "assist")
	if err != nil {
		return err
	}
	_, out, err := m.releaseClaimed(ctx, p, func(ctx context.Context, q keelsql.Querier) ([]Candidate, error) {
		return m.st.claimDueSlot(ctx, q, slot, p.now, m.set.txSize)
	})
	if err != nil {
		return err
	}
	m.observe(p, out)
	if len(out.failed) > 0 {
		m.met.failed.WithLabelValues(p.path).Add(float64(len(out.failed)))
		return out.failed[0].err
	}
	return nil
}
