// Package jobs holds the tracking module's workers: backfill queries of
// gaps on each carrier's backfill share and realtime queries on its
// realtime share. Both run on engine flow keys, so each carrier's quota,
// concurrency limit and breaker hold across every process; the workers only
// classify the carrier's answer and hand events to ingestion.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/modules/tracking/carrierapi"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/ingest"
)

// Shares, as sent to the carrier in carrierapi.ShareHeader.
const (
	ShareRealtime = "realtime"
	ShareBackfill = "backfill"
)

// DefaultRecheck is how long a backfill waits when the carrier does not
// have the missing event yet (waiting, not failing).
const DefaultRecheck = 5 * time.Minute

// Workers runs carrier queries for one module.
type Workers[TTx any] struct {
	Svc     *ingest.Service[TTx]
	Clients map[string]*carrierapi.Client
	Recheck time.Duration
}

// Register adds the workers to ws.
func (w *Workers[TTx]) Register(ws *keel.Workers) error {
	if err := keel.AddWorkerSafely[ingest.BackfillArgs](ws, keel.WorkerFunc[ingest.BackfillArgs](w.backfill)); err != nil {
		return err
	}
	if err := keel.AddWorkerSafely[ingest.VerifyArgs](ws, keel.WorkerFunc[ingest.VerifyArgs](w.verify)); err != nil {
		return err
	}
	return keel.AddWorkerSafely[ingest.RealtimeArgs](ws, keel.WorkerFunc[ingest.RealtimeArgs](w.realtime))
}

// FlowLimits are the two shares of every carrier as engine flow limits:
// rate (strictly spaced: burst 0, so no 1-second window holds more than the
// share), concurrency and a breaker with half-open probes.
func FlowLimits(cs []*domain.Carrier) []keeltype.FlowLimit {
	var out []keeltype.FlowLimit
	for _, c := range cs {
		for _, s := range []struct {
			key  string
			rate float64
		}{{c.RealtimeKey(), c.RealtimeShare}, {c.BackfillKey(), c.BackfillShare}} {
			out = append(out, keeltype.FlowLimit{Pattern: s.key, Queue: ingest.Queue, Rate: c.Rate(s.rate), MaxRunning: c.MaxConcurrent,
				BreakerFailures: c.BreakerFailures, BreakerCooldown: time.Duration(c.BreakerCooldown), BreakerProbes: c.BreakerProbes})
		}
	}
	return out
}

func (w *Workers[TTx]) client(code string) (*carrierapi.Client, error) {
	c, ok := w.Clients[code]
	if !ok {
		return nil, keel.JobPermanent(fmt.Errorf("carrier %q is not configured", code))
	}
	return c, nil
}

func (w *Workers[TTx]) backfill(ctx context.Context, job *keel.Job[ingest.BackfillArgs]) error {
	a := job.Args
	open, err := w.Svc.Store.GapIsOpen(ctx, a.Carrier, a.Waybill, a.Seq)
	if err != nil {
		return err
	}
	if !open {
		return nil // filled meanwhile (a late push): the carrier is not asked
	}
	cl, err := w.client(a.Carrier)
	if err != nil {
		return err
	}
	evs, err := cl.Events(ctx, ShareBackfill, a.Waybill, a.Seq)
	if err != nil {
		return classify(ctx, err)
	}
	// An answer for one sequence applies that event, but it does not
	// verify the waybill's final state (only a full answer does).
	if err := w.ingest(ctx, a.Carrier, ofWaybill(evs, a.Waybill)); err != nil {
		return err
	}
	if open, err = w.Svc.Store.GapIsOpen(ctx, a.Carrier, a.Waybill, a.Seq); err != nil || !open {
		return err
	}
	// The carrier answered but does not have the event (yet): not its
	// failure and not ours; look again later.
	return keel.JobWait("carrier_has_no_event_yet", time.Now().Add(w.recheck()))
}

func (w *Workers[TTx]) realtime(ctx context.Context, job *keel.Job[ingest.RealtimeArgs]) error {
	return w.full(ctx, ShareRealtime, job.Args.Carrier, job.Args.Waybill)
}

func (w *Workers[TTx]) verify(ctx context.Context, job *keel.Job[ingest.VerifyArgs]) error {
	return w.full(ctx, ShareBackfill, job.Args.Carrier, job.Args.Waybill)
}

// full asks the carrier for everything it has on a waybill, applies it, and
// records the answer: when it was read and what it reports as latest (what
// reconciliation compares the aggregate's final state with).
func (w *Workers[TTx]) full(ctx context.Context, share, carrier, waybill string) error {
	cl, err := w.client(carrier)
	if err != nil {
		return err
	}
	evs, err := cl.Events(ctx, share, waybill, 0)
	if err != nil {
		return classify(ctx, err)
	}
	mine := ofWaybill(evs, waybill)
	if err := w.ingest(ctx, carrier, mine); err != nil {
		return err
	}
	answer, err := w.Svc.Answer(ctx, carrier, mine)
	if err != nil {
		return err
	}
	return w.Svc.Store.Verified(ctx, carrier, waybill, w.Svc.Now().UTC(), answer)
}

// ofWaybill keeps the events of waybill: a query for one waybill vouches
// for that waybill only, whatever else an answer carries.
func ofWaybill(evs []domain.RawEvent, waybill string) []domain.RawEvent {
	mine := evs[:0:0]
	for _, e := range evs {
		if e.Waybill == waybill {
			mine = append(mine, e)
		}
	}
	return mine
}

// ingest applies what the carrier answered.
func (w *Workers[TTx]) ingest(ctx context.Context, carrier string, evs []domain.RawEvent) error {
	if len(evs) == 0 {
		return nil
	}
	_, err := w.Svc.Ingest(ctx, carrier, ingest.ViaPull, evs)
	return err
}

func (w *Workers[TTx]) recheck() time.Duration {
	if w.Recheck > 0 {
		return w.Recheck
	}
	return DefaultRecheck
}

// classify turns a failed query into the engine's outcome: a 429 waits its
// Retry-After plus jitter (never counted against the carrier); auth and
// parameter refusals go to manual; network trouble and 5xx are retried
// with the engine's jittered backoff and count toward the breaker; our own
// stop is handed back.
func classify(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("%w: %v", keel.ErrStopping, err)
	}
	var ce *carrierapi.Error
	if !errors.As(err, &ce) {
		return err
	}
	switch ce.Class {
	case carrierapi.RateLimited:
		return keel.JobSnooze(ce.RetryAfter + rand.N(ce.RetryAfter/4+time.Millisecond))
	case carrierapi.Permanent:
		return keel.JobPermanent(err)
	}
	return err
}
