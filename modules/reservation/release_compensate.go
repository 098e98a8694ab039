package reservation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
)

// maxErrorText bounds a stored error message.
const maxErrorText = 1000

// notificationKeep is how long delivered notification rows stay for
// inspection.
const notificationKeep = 7 * 24 * time.Hour

// markFailed records that a run could not release f: retry_count goes up,
// the error is kept, and compensation picks the record up; at
// reservation.max_retries it becomes a dead letter, audited in the same
// transaction. It reports whether the record became a dead letter.
func (m *Module[TTx]) markFailed(ctx context.Context, p *pass, f *failure) (bool, error) {
	msg := f.err.Error()
	if len(msg) > maxErrorText {
		msg = msg[:maxErrorText]
	}
	now := m.now()
	var dead bool
	err := m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		count, isDead, ok, err := m.st.markFailed(ctx, tx, f.c.ID, f.c.Version, msg, now, m.set.maxRetries)
		if err != nil || !ok {
			return err // !ok: no longer paid at this version, nothing to retry
		}
		if dead = isDead; !dead {
			return nil
		}
		client, err := m.engine()
		if err != nil {
			return err
		}
		return client.AuditRecordTx(keel.WithActor(ctx, p.actor), tx.Native(), keel.Audit{
			Action: "reservation.dead_letter", Target: fmt.Sprintf("reservation:%d", f.c.ID),
			Reason:  fmt.Sprintf("not released after %d failed runs: %s", count, msg),
			Context: map[string]any{"retry_count": count, "slot_id": f.c.SlotID, "category": f.c.CategoryID},
		})
	})
	if err != nil {
		return false, fmt.Errorf("recording the failure of reservation %d: %w", f.c.ID, err)
	}
	if dead {
		m.met.deadLettered.Inc()
		m.log.Error("reservation: dead letter", "reservation", f.c.ID, "error", msg)
	}
	return dead, nil
}

// Compensate re-processes records that failed in earlier runs (retry_count
// > 0, not dead), one by one with the in-run backoff; a record failing again
// counts one more failure and becomes a dead letter at the maximum. It also
// prunes delivered notification rows and hands over notices left from
// before the events outbox (see handOverLeftovers). The engine runs it
// every reservation.compensation_interval.
func (m *Module[TTx]) Compensate(ctx context.Context) (*Run, error) {
	started := time.Now()
	p, err := m.newPass(ctx, "compensation")
	if err != nil {
		return nil, fmt.Errorf("compensation: %w", err)
	}
	run := &Run{Kind: "compensation", Instance: m.instance(), StartedAt: p.now}
	var errs []string
	due, err := m.st.retryDue(ctx, p.now, m.set.pageSize)
	if err != nil {
		errs = append(errs, fmt.Sprintf("reading failed records: %v", err))
	}
	var failed []failure
	for _, c := range due {
		cands, out, err := m.releaseClaimed(ctx, p, m.claimOne(p, c, true))
		if err != nil {
			failed = append(failed, failure{c: c, err: err})
			continue
		}
		m.account(p, run, cands, out)
		failed = append(failed, out.failed...)
	}
	m.settle(ctx, p, failed, run, &errs)
	if err := m.st.pruneNotifications(ctx, p.now.Add(-notificationKeep), 10000); err != nil {
		errs = append(errs, fmt.Sprintf("pruning notifications: %v", err))
	}
	if err := m.handOverLeftovers(ctx); err != nil {
		errs = append(errs, err.Error())
	}
	if err := m.refreshDeadLetters(ctx); err != nil {
		errs = append(errs, err.Error())
	}
	return m.finishRun(ctx, run, started, errs)
}

// DeadLetterCount is how many paid reservations gave up being released.
func (m *Module[TTx]) DeadLetterCount(ctx context.Context) (int, error) {
	n, err := m.st.deadLetterCount(ctx)
	if err != nil {
		return 0, fmt.Errorf("counting dead letters: %w", err)
	}
	return n, nil
}

func (m *Module[TTx]) refreshDeadLetters(ctx context.Context) error {
	n, err := m.DeadLetterCount(ctx)
	if err != nil {
		return err
	}
	m.met.deadLetters.Set(float64(n))
	return nil
}

// RequeueDeadLetter hands a dead letter back to the scan (retry count
// cleared), audited with the operator's reason.
func (m *Module[TTx]) RequeueDeadLetter(ctx context.Context, id int64, reason string) error {
	client, err := m.engine()
	if err != nil {
		return err
	}
	now := m.now()
	err = m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		if _, err := m.st.requeueDeadLetter(ctx, tx, id, now); err != nil {
			if errors.Is(err, keelsql.ErrNoRows) {
				return errNotDeadLetter
			}
			return err
		}
		return client.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "reservation.dead_letter_requeue",
			Target: fmt.Sprintf("reservation:%d", id), Reason: reason})
	})
	if err != nil {
		return wrapf(err, "requeueing dead letter %d", id)
	}
	return m.refreshDeadLetters(ctx)
}
