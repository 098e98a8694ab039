package payment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/modules/payment/channel"
)

// SweepResult counts what a sweep did.
type SweepResult struct {
	Queried, Paid, Closed, StillPending int
}

// Sweep queries the payments still pending past their channel's callback
// horizon: paid → applied as the callback would have been (the same event
// id); unpaid past the payment timeout → closed at the channel first, and
// 已关闭 only once the close succeeded; unpaid before it → asked again later.
func (m *Module[TTx]) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	now := m.Now()
	rows, err := m.db.Query(ctx, m.q.Get("PaymentDue"), now, 100)
	due, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (string, error) {
		var s string
		return s, r.Scan(&s)
	})
	if err != nil {
		return res, fmt.Errorf("reading due payments: %w", err)
	}
	var errs []error
	for _, no := range due {
		if ctx.Err() != nil {
			break
		}
		res.Queried++
		what, err := m.QueryPayment(ctx, no)
		switch {
		case err != nil:
			errs = append(errs, err)
		case what == PayPaid:
			res.Paid++
		case what == PayClosed:
			res.Closed++
		default:
			res.StillPending++
		}
	}
	return res, errors.Join(errs...)
}

// QueryPayment asks the channel about one pending payment and acts on the
// answer; it returns the payment's state afterwards.
func (m *Module[TTx]) QueryPayment(ctx context.Context, no string) (string, error) {
	p, err := m.Payment(ctx, no)
	if err != nil {
		return "", err
	}
	if p.State != PayPending {
		return p.State, nil
	}
	cl, err := m.channelOf(p)
	if err != nil {
		return "", err
	}
	now := m.Now()
	n, qErr := cl.QueryPayment(ctx, no)
	switch {
	case qErr == nil && n != nil && n.State == channel.StatePaid:
		if n.Channel == "" {
			n.Channel = channel.Kind(p.Channel)
		}
		if n.Event == "" {
			n.Event = channel.EventPayment
		}
		outcome, _, err := m.apply(ctx, n, evidence{source: "query", digest: "", body: "(query answer)", at: now})
		if err != nil {
			return "", err
		}
		m.met.callbacks.WithLabelValues(p.Channel, "query_"+outcome).Inc()
		return m.stateOf(ctx, no)
	case (qErr == nil && n != nil && (n.State == channel.StateNotPaid || n.State == channel.StateClosed)) ||
		errors.Is(qErr, channel.ErrNotFound):
		if now.Before(p.ExpiresAt) {
			return PayPending, m.requeue(ctx, no, now)
		}
		// Closed at the channel first: only a close that succeeded (or a
		// trade the channel reports closed or never saw) closes ours, so
		// a buyer paying at this moment is not lost.
		if n == nil || n.State != channel.StateClosed {
			if err := cl.ClosePayment(ctx, no); err != nil && !errors.Is(err, channel.ErrNotFound) {
				return PayPending, errors.Join(fmt.Errorf("closing %s at the channel: %w", no, err), m.requeue(ctx, no, now))
			}
		}
		if _, err := m.closePayment(ctx, no, "timeout: channel confirmed unpaid and closed"); err != nil {
			return "", err
		}
		return m.stateOf(ctx, no)
	default:
		return PayPending, errors.Join(qErr, m.requeue(ctx, no, now))
	}
}

func (m *Module[TTx]) stateOf(ctx context.Context, no string) (string, error) {
	p, err := m.Payment(ctx, no)
	if err != nil {
		return "", err
	}
	return p.State, nil
}

// requeue sets the next query: at the payment's expiry, or a backoff
// after it when the expiry has passed.
func (m *Module[TTx]) requeue(ctx context.Context, no string, now time.Time) error {
	p, err := m.Payment(ctx, no)
	if err != nil {
		return err
	}
	next := p.ExpiresAt
	if !next.After(now) {
		next = now.Add(m.backoff(p.Queries + 1))
	}
	_, err = m.db.Exec(ctx, m.q.Get("PaymentQueried"), no, next, now)
	return err
}

// Health reads the module's health numbers.
func (m *Module[TTx]) Health(ctx context.Context) (*Health, error) {
	h := &Health{DiscrepancyAmount: map[string]int64{}}
	rows, err := m.db.Query(ctx, m.q.Get("PaymentStateCounts"))
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			rows.Close()
			return nil, err
		}
		switch s {
		case PayPending:
			h.PaymentsPending = n
		case PayManual:
			h.PaymentsManual = n
		}
	}
	rows.Close()
	rows, err = m.db.Query(ctx, m.q.Get("RefundStateCounts"))
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var s string
		var n, amt int64
		if err := rows.Scan(&s, &n, &amt); err != nil {
			rows.Close()
			return nil, err
		}
		switch s {
		case RefundUnknown:
			h.RefundsUnknown, h.RefundsUnknownMinor = n, amt
		case RefundManual:
			h.RefundsManual = n
		}
	}
	rows.Close()
	var oldest *time.Time
	if err := m.db.QueryRow(ctx, m.q.Get("OldestUnposted")).Scan(&oldest); err != nil {
		return nil, err
	}
	if oldest != nil {
		h.OldestUnposted = max(m.Now().Sub(*oldest), 0)
	}
	if err := m.db.QueryRow(ctx, m.q.Get("SecurityCount")).Scan(&h.SecurityRefusals); err != nil {
		return nil, err
	}
	if m.recon != nil {
		for _, name := range m.reconNames() {
			for _, st := range []keelrecon.State{keelrecon.StateOpen, keelrecon.StateAwaitingApproval, keelrecon.StateApproved} {
				ds, err := m.recon.ListDiscrepancies(ctx, keelrecon.DiscrepancyFilter{Reconciler: name, State: st, Limit: 500})
				if err != nil {
					return nil, err
				}
				for _, d := range ds {
					h.Discrepancies++
					if d.Currency != "" {
						a := d.Impact
						if a < 0 {
							a = -a
						}
						h.DiscrepancyAmount[d.Currency] += a
					}
				}
			}
		}
	}
	return h, nil
}
