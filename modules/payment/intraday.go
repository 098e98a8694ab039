package payment

import (
	"context"
	"fmt"
	"github.com/keelwork/keel/module/web"
	"strings"
	"time"

	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
)

// reconIntraday is the intraday incremental reconciliation (seed 004 §4:
// 日内增量对账发现延迟). The channel's bill of a day comes out the next
// day; during the day this run compares what changed since the start of
// the cutoff's day (China Standard Time, the bills' day) across our three
// sources: a payment paid longer than payment.recon_lag ago whose ledger
// entry is not posted (missing ours, key ledger:<payment>) or whose order
// is not marked paid (status mismatch, key order:<order>) — the same keys
// as the daily full run's, the same actions (补记 through the original
// event id), executed by an operator: without the bill, a delay is
// reported, not healed.
//
// It is a partial run: it reads the day's changes (a page at a time) and
// rechecks each discrepancy of its own still unsettled, whatever its day,
// and it settles only those it rechecked (keelrecon.Scope), so one that
// appeared meanwhile, or a discrepancy of the daily run, is never taken as
// gone because this run did not look at it. A delay the consumers caught up
// with is resolved by the next run.
func (m *Module[TTx]) reconIntraday(ctx context.Context, in keelrecon.RunInput) (keelrecon.RunOutput, error) {
	var out keelrecon.RunOutput
	cutoff := in.Cutoff
	since := startOfDay(cutoff)
	due := cutoff.Add(-m.set.ReconLag) // paid before this: the consumers had their time
	reported := map[string]bool{}
	check := func(p *ourPayment) {
		out.Compared++
		if p.PaidAt == nil || p.PaidAt.After(due) || (p.State != PayPaid && p.State != PayManual) {
			return
		}
		ev := func() map[string]any {
			return map[string]any{
				"ours":   map[string]any{"payment_no": p.No, "state": p.State, "amount_minor": p.Amount, "currency": p.Currency, "transaction_id": p.Txn, "paid_at": p.PaidAt.UTC()},
				"ledger": map[string]any{"capture_minor": p.Booked, "reversed_minor": p.Reversed, "currency": p.Currency},
				"orders": map[string]any{"order_id": p.Order, "state": p.OrderState, "amount_minor": p.OrderAmount, "currency": p.Currency},
			}
		}
		if p.Booked == 0 && p.Reversed == 0 && !reported["ledger:"+p.No] {
			reported["ledger:"+p.No] = true
			out.Discrepancies = append(out.Discrepancies, keelrecon.Discrepancy{Class: keelrecon.MissingOurs, Key: "ledger:" + p.No,
				Evidence:        evidenceOf(ev()),
				SuggestedAction: "账务延迟: 支付成功超过时限仍未入账; 可按原支付事件号补记入账分录 (" + actBook + ")",
				Impact:          p.Amount, Currency: p.Currency})
		}
		if p.State == PayPaid && p.OrderState != OrderPaid && !reported["order:"+p.Order] {
			reported["order:"+p.Order] = true
			out.Discrepancies = append(out.Discrepancies, keelrecon.Discrepancy{Class: keelrecon.StatusMismatch, Key: "order:" + p.Order,
				Evidence:        evidenceOf(ev()),
				SuggestedAction: "订单延迟: 支付成功超过时限订单仍未标记已支付; 可按原支付事件号标记 (" + actOrder + ")",
				Impact:          p.Amount, Currency: p.Currency})
		}
	}
	// The day's changes, a page at a time.
	changed := &pageStream[ourPayment]{fetch: func(ctx context.Context, last *ourPayment) ([]ourPayment, error) {
		at, no := since, ""
		if last != nil {
			at, no = last.UpdatedAt, last.No
		}
		return m.intradayPayments(ctx, "IntradayPaymentPage", cutoff, since, at, no, reconPage)
	}}
	for {
		p, err := changed.peek(ctx)
		if err != nil {
			return out, err
		}
		if p == nil {
			break
		}
		c := *p
		changed.next()
		check(&c)
	}
	// This reconciler's unsettled discrepancies, each rechecked: they are
	// the run's scope beyond the day.
	open, err := m.unsettled(ctx, ReconIntraday)
	if err != nil {
		return out, err
	}
	rechecked := make(map[string]bool, len(open))
	for _, key := range open {
		kind, subject, _ := strings.Cut(key, ":")
		var ps []ourPayment
		switch kind {
		case "ledger":
			ps, err = m.intradayPayments(ctx, "IntradayPaymentByNo", cutoff, subject)
		case "order":
			ps, err = m.intradayPayments(ctx, "IntradayPaymentByOrder", cutoff, subject)
		default:
			continue // not one of this run's keys: left as it is
		}
		if err != nil {
			return out, err
		}
		rechecked[key] = true
		if len(ps) == 1 && !(ps[0].UpdatedAt.After(since) && !ps[0].UpdatedAt.After(cutoff)) {
			check(&ps[0]) // (one changed today was checked with the day's changes)
		}
	}
	out.Scope = &keelrecon.Scope{
		Name: fmt.Sprintf("%s 起变更的支付及本对账未结的差异 · payments changed since %[1]s and this reconciler's unsettled discrepancies",
			since.In(billZone).Format("2006-01-02 15:04")+" "+web.ZoneName("en", billZone)),
		Covers: func(_ keelrecon.Class, key string) bool { return rechecked[key] },
	}
	return out, nil
}

// startOfDay is the start of t's day in the channels' zone.
func startOfDay(t time.Time) time.Time {
	y, mo, d := t.In(billZone).Date()
	return time.Date(y, mo, d, 0, 0, 0, 0, billZone).UTC()
}

func (m *Module[TTx]) intradayPayments(ctx context.Context, query string, args ...any) ([]ourPayment, error) {
	rows, err := m.db.Query(ctx, m.q.Get(query), args...)
	list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (ourPayment, error) {
		var p ourPayment
		err := r.Scan(&p.No, &p.Order, &p.Channel, &p.Merchant, &p.Amount, &p.Currency, &p.State, &p.Txn, &p.PaidAt,
			&p.CreatedAt, &p.Booked, &p.Reversed, &p.OrderState, &p.OrderAmount, &p.UpdatedAt)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the intraday payments (%s): %w", query, err)
	}
	return list, nil
}

// unsettled lists the keys of a reconciler's discrepancies not yet
// verified or resolved.
func (m *Module[TTx]) unsettled(ctx context.Context, name string) ([]string, error) {
	var keys []string
	for _, st := range keelrecon.States {
		if st == keelrecon.StateVerified || st == keelrecon.StateResolved {
			continue
		}
		var before int64
		for {
			ds, err := m.recon.ListDiscrepancies(ctx, keelrecon.DiscrepancyFilter{Reconciler: name, State: st, Before: before, Limit: 500})
			if err != nil {
				return nil, fmt.Errorf("listing the %s discrepancies of %s: %w", st, name, err)
			}
			for _, d := range ds {
				keys = append(keys, d.Key)
				before = d.ID
			}
			if len(ds) < 500 {
				break
			}
		}
	}
	return keys, nil
}
