package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/modules/payment/channel"
)

// The reconcilers.
const (
	// ReconChannel is the four-way reconciliation: channel bill ↔ payment
	// and refund records ↔ ledger ↔ orders.
	ReconChannel = "payment.channel"
	// ReconCallbacks turns verified callbacks that disagree with their
	// payment order into discrepancies.
	ReconCallbacks = "payment.callbacks"
	// ReconIntraday is the intraday incremental reconciliation: the day's
	// changed payments ↔ ledger ↔ orders, before the channel's bill is out.
	ReconIntraday = "payment.intraday"
)

// billZone is the channels' day: both settle bills on China Standard Time.
var billZone = time.FixedZone("CST", 8*3600)

func (m *Module[TTx]) reconNames() []string {
	return []string{ReconCallbacks, ReconChannel, ReconIntraday}
}

type reconciler[TTx any] struct {
	name    string
	every   time.Duration
	run     func(ctx context.Context, in keelrecon.RunInput) (keelrecon.RunOutput, error)
	execute func(ctx context.Context, tx keelsql.Tx[TTx], d *keelrecon.DiscrepancyRow, actionID string) error
}

func (r *reconciler[TTx]) Name() string            { return r.name }
func (r *reconciler[TTx]) RuleVersion() string     { return "1" }
func (r *reconciler[TTx]) Schedule() keel.Schedule { return keel.Every(r.every) }
func (r *reconciler[TTx]) Run(ctx context.Context, in keelrecon.RunInput) (keelrecon.RunOutput, error) {
	return r.run(ctx, in)
}
func (r *reconciler[TTx]) Execute(ctx context.Context, tx keelsql.Tx[TTx], d *keelrecon.DiscrepancyRow, actionID string) error {
	return r.execute(ctx, tx, d, actionID)
}

func (m *Module[TTx]) registerRecon() error {
	if m.recon == nil {
		return nil
	}
	for _, r := range []*reconciler[TTx]{
		{name: ReconCallbacks, every: 10 * time.Minute, run: m.reconCallbacks, execute: m.executeAdjudicate},
		{name: ReconChannel, every: time.Hour, run: m.reconChannel, execute: m.executeChannel},
		{name: ReconIntraday, every: 10 * time.Minute, run: m.reconIntraday, execute: m.executeChannel},
	} {
		if err := m.recon.Register(r); err != nil {
			return err
		}
	}
	return nil
}

// FetchBill downloads a channel's bill of a day and keeps it (replacing a
// previous download of the same day) for the next run.
func (m *Module[TTx]) FetchBill(ctx context.Context, kind channel.Kind, day time.Time) (int, error) {
	mc, ok := m.merchant(kind)
	if !ok || mc.Channel == nil || mc.Channel.Client == nil {
		return 0, perr(ErrNoChannel, "%s", kind)
	}
	lines, err := mc.Channel.Client.Bill(ctx, day)
	if err != nil {
		return 0, fmt.Errorf("downloading the %s bill of %s: %w", kind, day.Format(time.DateOnly), err)
	}
	d := day.In(billZone).Format(time.DateOnly)
	now := m.Now()
	err = m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		if _, err := tx.Exec(ctx, m.q.Get("BillDelete"), string(kind), d); err != nil {
			return err
		}
		for _, l := range lines {
			if _, err := tx.Exec(ctx, m.q.Get("BillInsert"), string(kind), d, string(l.Event), l.MerchantID, l.OutTradeNo,
				l.TransactionID, l.OutRefundNo, l.RefundID, l.AmountMinor, l.FeeMinor, l.Currency, string(l.State),
				l.At.UTC(), now); err != nil {
				return err
			}
		}
		// The fees go to the ledger with the bill: fetched again, the
		// same events are no-ops.
		evs, err := m.feeEvents(ctx, tx, kind, d, lines)
		if err != nil {
			return err
		}
		return m.ev.EmitManyTx(ctx, tx, evs)
	})
	return len(lines), err
}

// reconCallbacks: every verified callback that disagreed with its payment
// order and no operator has settled.
func (m *Module[TTx]) reconCallbacks(ctx context.Context, in keelrecon.RunInput) (keelrecon.RunOutput, error) {
	var out keelrecon.RunOutput
	type mismatch struct {
		no, txn, cur, detail, dig string
		amt, count                int64
		at                        time.Time
	}
	// Read whole before reading the payments: SQLite has one connection.
	rows, err := m.db.Query(ctx, m.q.Get("CallbackMismatches"), in.Cutoff)
	ms, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (mismatch, error) {
		var x mismatch
		err := r.Scan(&x.no, &x.txn, &x.amt, &x.cur, &x.detail, &x.dig, &x.at, &x.count)
		return x, err
	})
	if err != nil {
		return out, err
	}
	for _, x := range ms {
		no, txn, amt, cur, dig, at, count := x.no, x.txn, x.amt, x.cur, x.dig, x.at, x.count
		out.Compared++
		p, _ := m.Payment(ctx, no)
		ours := map[string]any{"payment_no": no}
		if p != nil {
			ours = map[string]any{"payment_no": no, "state": p.State, "amount_minor": p.AmountMinor, "currency": p.Currency,
				"merchant_id": p.MerchantID, "transaction_id": p.TransactionID}
		}
		class := keelrecon.AmountMismatch
		if p != nil && amt == p.AmountMinor && cur == p.Currency {
			class = keelrecon.StatusMismatch
		}
		out.Discrepancies = append(out.Discrepancies, keelrecon.Discrepancy{
			Class: class, Key: "callback:" + no + ":" + txn,
			Evidence: evidenceOf(map[string]any{
				"ours":    ours,
				"channel": map[string]any{"transaction_id": txn, "amount_minor": amt, "currency": cur, "callbacks": count, "sha256": dig, "first_at": at.UTC()},
				"ledger":  map[string]any{"booked": false},
				"orders":  map[string]any{"changed": false},
			}),
			SuggestedAction: "人工核实回调与支付单不一致的原因, 必要时原路退回差额; 执行即登记核实结论",
			Impact:          amt, Currency: cur, NeedsApproval: true,
		})
	}
	return out, nil
}

// executeAdjudicate records the operator's finding on a disagreeing
// callback; the next run no longer reports it.
func (m *Module[TTx]) executeAdjudicate(ctx context.Context, tx keelsql.Tx[TTx], d *keelrecon.DiscrepancyRow, actionID string) error {
	rest := strings.TrimPrefix(d.Key, "callback:")
	no, txn, _ := strings.Cut(rest, ":")
	if _, err := tx.Exec(ctx, m.q.Get("CallbackMismatchSettle"), no, txn); err != nil {
		return err
	}
	return m.compensation(ctx, tx, d, actionID, "adjudicate_callback", "")
}

func (m *Module[TTx]) compensation(ctx context.Context, tx keelsql.Tx[TTx], d *keelrecon.DiscrepancyRow, actionID, kind, detail string) error {
	_, err := tx.Exec(ctx, m.q.Get("CompensationInsert"), actionID, d.ID, kind, d.Key, d.Impact, d.Currency, detail,
		actorOr(ctx, keelrecon.SystemActor), m.Now())
	return err
}

func evidenceOf(src map[string]any) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(src))
	for k, v := range src {
		b, _ := json.Marshal(v)
		out[k] = b
	}
	return out
}

type billRow struct {
	ID                                                                int64
	Channel, Day, Event, Merchant, PaymentNo, Txn, RefundNo, RefundID string
	Amount, Fee                                                       int64
	Currency, State                                                   string
	At                                                                time.Time
}

type ourPayment struct {
	No, Order, Channel, Merchant string
	Amount                       int64
	Currency, State, Txn         string
	PaidAt                       *time.Time
	CreatedAt                    time.Time
	Booked, Reversed             int64
	OrderState                   string
	OrderAmount                  int64
	UpdatedAt                    time.Time // read by the intraday run only
}

type ourRefund struct {
	No, PaymentNo     string
	Amount            int64
	Currency, State   string
	UpdatedAt         time.Time
	Channel, Merchant string
	Booked            int64
}

// Actions a channel discrepancy's Execute performs, named in its key.
const (
	actHeal    = "heal"    // 补记: query the channel, apply through the original event id
	actBook    = "book"    // 补记: post the ledger entry of the original event
	actOrder   = "order"   // 补记: mark the order paid from the original event
	actReverse = "reverse" // 冲正: a reversing entry of a capture the channel never had
	actRefund  = "refund"  // 退款: money the channel took for a closed order goes back
	actAdjudge = "adjudge" // 人工核实: the operator's finding is recorded
)

// reconChannel is the four-way reconciliation, transaction by transaction
// first, then summed per day, merchant and currency.
//
// It is a streamed merge: the bill's payment lines, our payments (each
// with its order, joined per page) and the ledger's entries are read in
// payment-number order a page at a time and merged by that number, then the
// bill's refund lines and our refunds by refund number. What it keeps is a
// page of each source, the sums per day, merchant and currency, and the
// discrepancies it found: its memory does not grow with the number of
// transactions.
func (m *Module[TTx]) reconChannel(ctx context.Context, in keelrecon.RunInput) (keelrecon.RunOutput, error) {
	var out keelrecon.RunOutput
	settled, err := m.settledKeys(ctx, in.Cutoff)
	if err != nil {
		return out, err
	}
	days, err := m.billDays(ctx, in.Cutoff)
	if err != nil {
		return out, err
	}
	var ds []keelrecon.Discrepancy
	add := func(d keelrecon.Discrepancy, fingerprint string) {
		if f, ok := settled[d.Key]; ok && f == fingerprint {
			return // adjudicated by an operator on this very evidence
		}
		d.SuggestedAction += " [" + fingerprint + "]"
		ds = append(ds, d)
	}
	type sumKey struct{ day, merchant, currency string }
	theirs, ours := map[sumKey]int64{}, map[sumKey]int64{}
	explained := map[sumKey]bool{}

	// comparePayment is one payment number's bill lines against our
	// payment (either may be missing).
	comparePayment := func(no string, lines []billRow, p *ourPayment) {
		sortLines(lines)
		if len(lines) == 0 {
			// Ours the channel's bill does not have (only for days whose bill is in).
			if p.PaidAt == nil || (p.State != PayPaid && p.State != PayManual) {
				return
			}
			day := p.PaidAt.In(billZone).Format(time.DateOnly)
			if !days[p.Channel+"/"+day] {
				return
			}
			explained[sumKey{day, p.Merchant, p.Currency}] = true
			if p.Reversed > 0 {
				return // reversed already: nothing left to correct
			}
			ev := map[string]any{"channel": map[string]any{"found": false, "day": day},
				"ours":   map[string]any{"payment_no": p.No, "state": p.State, "amount_minor": p.Amount, "currency": p.Currency, "transaction_id": p.Txn},
				"ledger": map[string]any{"capture_minor": p.Booked, "reversed_minor": p.Reversed, "currency": p.Currency},
				"orders": map[string]any{"order_id": p.Order, "state": p.OrderState}}
			add(keelrecon.Discrepancy{Class: keelrecon.MissingTheirs, Key: "pay:" + no, Evidence: evidenceOf(ev),
				SuggestedAction: "渠道账单无此笔: 冲正入账分录 (" + actReverse + ")",
				Impact:          -p.Amount, Currency: p.Currency, NeedsApproval: true}, fmt.Sprintf("%s %d %s", p.Txn, p.Amount, p.Currency))
			return
		}
		b := lines[0]
		if b.State == string(channel.StateRefunded) {
			b.State = string(channel.StatePaid) // a refunded trade was paid first: its refunds are matched below
		}
		sk := sumKey{b.Day, b.Merchant, b.Currency}
		ev := map[string]any{"channel": billEvidence(lines)}
		if p != nil {
			ev["ours"] = map[string]any{"payment_no": p.No, "state": p.State, "amount_minor": p.Amount, "currency": p.Currency, "transaction_id": p.Txn}
			ev["ledger"] = map[string]any{"capture_minor": p.Booked, "reversed_minor": p.Reversed, "currency": p.Currency}
			ev["orders"] = map[string]any{"order_id": p.Order, "state": p.OrderState, "amount_minor": p.OrderAmount, "currency": p.Currency}
		} else {
			ev["ours"] = map[string]any{"payment_no": no, "found": false}
		}
		fp := fmt.Sprintf("%s %d %s %d", b.Txn, b.Amount, b.Currency, len(lines))
		switch {
		case len(lines) > 1:
			explained[sk] = true
			add(keelrecon.Discrepancy{Class: keelrecon.Duplicate, Key: "pay:" + no, Evidence: evidenceOf(ev),
				SuggestedAction: "渠道账单重复: 人工核实, 执行即登记核实结论 (" + actAdjudge + ")",
				Impact:          b.Amount * int64(len(lines)-1), Currency: b.Currency, NeedsApproval: true}, fp)
		case p == nil:
			explained[sk] = true
			add(keelrecon.Discrepancy{Class: keelrecon.MissingOurs, Key: "pay:" + no, Evidence: evidenceOf(ev),
				SuggestedAction: "我方无此支付单: 人工核实 (" + actAdjudge + ")",
				Impact:          b.Amount, Currency: b.Currency, NeedsApproval: true}, fp)
		case b.Amount != p.Amount || b.Currency != p.Currency:
			explained[sk] = true
			add(keelrecon.Discrepancy{Class: keelrecon.AmountMismatch, Key: "pay:" + no, Evidence: evidenceOf(ev),
				SuggestedAction: "金额不符: 人工核实 (" + actAdjudge + ")",
				Impact:          b.Amount - p.Amount, Currency: b.Currency, NeedsApproval: true}, fp)
		case b.State == string(channel.StatePaid) && p.State == PayPending:
			add(keelrecon.Discrepancy{Class: keelrecon.MissingOurs, Key: "pay:" + no, Evidence: evidenceOf(ev),
				SuggestedAction: "补记: 向渠道查单并按原事件号入账 (" + actHeal + ")",
				Impact:          b.Amount, Currency: b.Currency, SafeAutoHeal: true}, fp)
			ours[sk] += b.Amount // healed by the original event, not a sum difference
		case b.State == string(channel.StatePaid) && p.State == PayClosed:
			explained[sk] = true
			add(keelrecon.Discrepancy{Class: keelrecon.StatusMismatch, Key: "pay:" + no, Evidence: evidenceOf(ev),
				SuggestedAction: "状态不符: 渠道已收款而订单已关闭, 原路退款 (" + actRefund + ")",
				Impact:          b.Amount, Currency: b.Currency}, fp)
		case b.State == string(channel.StatePaid) && (p.State == PayPaid || p.State == PayManual):
			ours[sk] += p.Amount
			if p.Booked == 0 {
				add(keelrecon.Discrepancy{Class: keelrecon.MissingOurs, Key: "ledger:" + no, Evidence: evidenceOf(ev),
					SuggestedAction: "补记: 按原支付事件号补记入账分录 (" + actBook + ")",
					Impact:          p.Amount, Currency: p.Currency, SafeAutoHeal: true}, fp)
			}
			if p.State == PayPaid && p.OrderState != OrderPaid {
				add(keelrecon.Discrepancy{Class: keelrecon.StatusMismatch, Key: "order:" + p.Order, Evidence: evidenceOf(ev),
					SuggestedAction: "补记: 按原支付事件号标记订单已支付 (" + actOrder + ")",
					Impact:          p.Amount, Currency: p.Currency, SafeAutoHeal: true}, fp)
			}
		default:
			explained[sk] = true
			add(keelrecon.Discrepancy{Class: keelrecon.StatusMismatch, Key: "pay:" + no, Evidence: evidenceOf(ev),
				SuggestedAction: "状态不符: 人工核实 (" + actAdjudge + ")",
				Impact:          b.Amount, Currency: b.Currency, NeedsApproval: true}, fp)
		}
	}
	// compareRefund is one refund number's bill lines against our refund
	// (refunds only on our side are not compared here).
	compareRefund := func(no string, lines []billRow, r *ourRefund) {
		sortLines(lines)
		b := lines[0]
		sk := sumKey{b.Day, b.Merchant, b.Currency}
		ev := map[string]any{"channel": billEvidence(lines)}
		fp := fmt.Sprintf("%s %d %s %d", b.RefundID, b.Amount, b.Currency, len(lines))
		if r != nil {
			ev["ours"] = map[string]any{"refund_no": r.No, "payment_no": r.PaymentNo, "state": r.State, "amount_minor": r.Amount, "currency": r.Currency}
			ev["ledger"] = map[string]any{"settle_minor": r.Booked, "currency": r.Currency}
		}
		switch {
		case len(lines) > 1:
			explained[sk] = true
			add(keelrecon.Discrepancy{Class: keelrecon.Duplicate, Key: "refund:" + no, Evidence: evidenceOf(ev),
				SuggestedAction: "渠道重复退款: 人工核实 (" + actAdjudge + ")", Impact: -b.Amount * int64(len(lines)-1),
				Currency: b.Currency, NeedsApproval: true}, fp)
		case r == nil:
			explained[sk] = true
			add(keelrecon.Discrepancy{Class: keelrecon.MissingOurs, Key: "refund:" + no, Evidence: evidenceOf(ev),
				SuggestedAction: "我方无此退款单: 人工核实 (" + actAdjudge + ")", Impact: -b.Amount, Currency: b.Currency,
				NeedsApproval: true}, fp)
		case r.Amount != b.Amount || r.Currency != b.Currency:
			explained[sk] = true
			add(keelrecon.Discrepancy{Class: keelrecon.AmountMismatch, Key: "refund:" + no, Evidence: evidenceOf(ev),
				SuggestedAction: "退款金额不符: 人工核实 (" + actAdjudge + ")", Impact: r.Amount - b.Amount, Currency: b.Currency,
				NeedsApproval: true}, fp)
		case r.State != RefundDone:
			ours[sk] -= r.Amount
			add(keelrecon.Discrepancy{Class: keelrecon.StatusMismatch, Key: "refund:" + no, Evidence: evidenceOf(ev),
				SuggestedAction: "补记: 向渠道查询退款并确认 (" + actHeal + ")", Impact: -r.Amount, Currency: r.Currency,
				SafeAutoHeal: true}, fp)
		default:
			ours[sk] -= r.Amount
		}
	}

	// Payments: the bill's payment lines merged with our payments, and
	// the ledger's entries of each.
	billPays := m.billStream(in.Cutoff, "BillPaymentPage", func(b *billRow) string { return b.PaymentNo })
	pays := m.paymentStream(in.Cutoff)
	journal := m.journalStream(in.Cutoff)
	var jerr error
	err = mergeStreams(ctx, billPays, pays, func(b *billRow) string { return b.PaymentNo }, func(p *ourPayment) string { return p.No },
		func(no string, lines []billRow, p *ourPayment) {
			booked, reversed, err := ledgerOf(ctx, journal, no)
			if err != nil {
				jerr = err
				return
			}
			if p != nil {
				p.Booked, p.Reversed = booked, reversed
			}
			out.Compared += int64(len(lines))
			if p != nil {
				out.Compared++
			}
			for _, b := range lines {
				theirs[sumKey{b.Day, b.Merchant, b.Currency}] += b.Amount
			}
			if jerr == nil && (len(lines) > 0 || p != nil) {
				comparePayment(no, lines, p)
			}
		})
	if err == nil {
		err = jerr
	}
	if err != nil {
		return out, err
	}
	// Refunds: the bill's refund lines merged with our refunds.
	billRefunds := m.billStream(in.Cutoff, "BillRefundPage", func(b *billRow) string { return b.RefundNo })
	refunds := m.refundStream(in.Cutoff)
	err = mergeStreams(ctx, billRefunds, refunds, func(b *billRow) string { return b.RefundNo }, func(r *ourRefund) string { return r.No },
		func(no string, lines []billRow, r *ourRefund) {
			out.Compared += int64(len(lines))
			if len(lines) == 0 {
				return
			}
			for _, b := range lines {
				theirs[sumKey{b.Day, b.Merchant, b.Currency}] -= b.Amount
			}
			compareRefund(no, lines, r)
		})
	if err != nil {
		return out, err
	}
	// Then the sums per day, merchant and currency: a group whose totals
	// differ with no transaction-level discrepancy to explain it is one of
	// its own; equal totals never hide a transaction-level difference,
	// which was reported above whatever the sums say.
	keys := make([]sumKey, 0, len(theirs))
	for k := range theirs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].day+keys[i].merchant+keys[i].currency < keys[j].day+keys[j].merchant+keys[j].currency
	})
	for _, k := range keys {
		if theirs[k] == ours[k] || explained[k] {
			continue
		}
		add(keelrecon.Discrepancy{Class: keelrecon.Other, Key: "sum:" + k.day + ":" + k.merchant + ":" + k.currency,
			Evidence:        evidenceOf(map[string]any{"channel": map[string]any{"net_minor": theirs[k]}, "ours": map[string]any{"net_minor": ours[k]}}),
			SuggestedAction: "日汇总不符: 人工核实 (" + actAdjudge + ")", Impact: theirs[k] - ours[k], Currency: k.currency,
			NeedsApproval: true}, fmt.Sprintf("%d %d", theirs[k], ours[k]))
	}
	out.Discrepancies = ds
	return out, nil
}

// settledKeys are the operators' adjudications up to the cutoff: the key
// each settles with the evidence's fingerprint it saw. There is one per
// operator action, not per transaction.
func (m *Module[TTx]) settledKeys(ctx context.Context, cutoff time.Time) (map[string]string, error) {
	settled := map[string]string{}
	rows, err := m.db.Query(ctx, m.q.Get("CompensationsSettled"), cutoff)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var s, d string
		if err := rows.Scan(&s, &d); err != nil {
			return nil, err
		}
		settled[s] = d
	}
	return settled, rows.Err()
}

// billDays are the (channel, day) bills fetched by the cutoff: a payment
// is missing on the channel's side only if its day's bill is in.
func (m *Module[TTx]) billDays(ctx context.Context, cutoff time.Time) (map[string]bool, error) {
	rows, err := m.db.Query(ctx, m.q.Get("BillDays"), cutoff)
	list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (string, error) {
		var ch, day string
		err := r.Scan(&ch, &day)
		return ch + "/" + day, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the bills' days: %w", err)
	}
	days := make(map[string]bool, len(list))
	for _, d := range list {
		days[d] = true
	}
	return days, nil
}

// sortLines puts one key's bill lines in bill order (channel, day, line):
// the first is the one a discrepancy's fields come from, whichever day's
// bill was fetched last.
func sortLines(lines []billRow) {
	sort.Slice(lines, func(i, j int) bool {
		a, b := &lines[i], &lines[j]
		if a.Channel != b.Channel {
			return a.Channel < b.Channel
		}
		if a.Day != b.Day {
			return a.Day < b.Day
		}
		return a.ID < b.ID
	})
}

// reconPage is how many rows a page of one source holds.
const reconPage = 2000

// pageStream reads a keyset-paged query row by row: a page is fetched
// (and read whole, so that SQLite's one connection is free between pages)
// when the last one runs out.
type pageStream[T any] struct {
	fetch func(ctx context.Context, last *T) ([]T, error)
	buf   []T
	i     int
	eof   bool
}

// peek is the next row, nil at the end. It stays valid until next.
func (s *pageStream[T]) peek(ctx context.Context) (*T, error) {
	if s.i < len(s.buf) {
		return &s.buf[s.i], nil
	}
	if s.eof {
		return nil, nil
	}
	var last *T
	if n := len(s.buf); n > 0 {
		l := s.buf[n-1]
		last = &l
	}
	buf, err := s.fetch(ctx, last)
	if err != nil {
		return nil, err
	}
	s.buf, s.i, s.eof = buf, 0, len(buf) < reconPage
	if len(buf) == 0 {
		return nil, nil
	}
	return &s.buf[0], nil
}

func (s *pageStream[T]) next() { s.i++ }

// mergeStreams merges lines (several per key) with records (at most one
// per key), both in ascending bytewise key order, calling each once per key
// with that key's lines and record (nil when there is none).
func mergeStreams[L, R any](ctx context.Context, lines *pageStream[L], recs *pageStream[R], lineKey func(*L) string,
	recKey func(*R) string, each func(key string, lines []L, rec *R)) error {
	var group []L
	for {
		l, err := lines.peek(ctx)
		if err != nil {
			return err
		}
		r, err := recs.peek(ctx)
		if err != nil {
			return err
		}
		var key string
		switch {
		case l == nil && r == nil:
			return nil
		case l == nil:
			key = recKey(r)
		case r == nil:
			key = lineKey(l)
		default:
			key = min(lineKey(l), recKey(r))
		}
		group = group[:0]
		for l != nil && lineKey(l) == key {
			group = append(group, *l)
			lines.next()
			if l, err = lines.peek(ctx); err != nil {
				return err
			}
		}
		var rec *R
		if r != nil && recKey(r) == key {
			c := *r
			rec = &c
			recs.next()
		}
		each(key, group, rec)
	}
}

// billStream pages through the bill's lines of one kind (query) in the
// order of key.
func (m *Module[TTx]) billStream(cutoff time.Time, query string, key func(*billRow) string) *pageStream[billRow] {
	return &pageStream[billRow]{fetch: func(ctx context.Context, last *billRow) ([]billRow, error) {
		after, id := "", int64(0)
		if last != nil {
			after, id = key(last), last.ID
		}
		rows, err := m.db.Query(ctx, m.q.Get(query), cutoff, after, id, reconPage)
		list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (billRow, error) {
			var b billRow
			err := r.Scan(&b.ID, &b.Channel, &b.Day, &b.Event, &b.Merchant, &b.PaymentNo, &b.Txn, &b.RefundNo, &b.RefundID,
				&b.Amount, &b.Fee, &b.Currency, &b.State, &b.At)
			return b, err
		})
		if err != nil {
			return nil, fmt.Errorf("reading the bill's lines after %q: %w", after, err)
		}
		return list, nil
	}}
}

func (m *Module[TTx]) paymentStream(cutoff time.Time) *pageStream[ourPayment] {
	return &pageStream[ourPayment]{fetch: func(ctx context.Context, last *ourPayment) ([]ourPayment, error) {
		after := ""
		if last != nil {
			after = last.No
		}
		rows, err := m.db.Query(ctx, m.q.Get("ReconPaymentPage"), cutoff, after, reconPage)
		list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (ourPayment, error) {
			var p ourPayment
			err := r.Scan(&p.No, &p.Order, &p.Channel, &p.Merchant, &p.Amount, &p.Currency, &p.State, &p.Txn, &p.PaidAt,
				&p.CreatedAt, &p.OrderState, &p.OrderAmount)
			return p, err
		})
		if err != nil {
			return nil, fmt.Errorf("reading the payments after %q: %w", after, err)
		}
		return list, nil
	}}
}

// journalRow is one ledger entry of the merge.
type journalRow struct {
	ID        int64
	PaymentNo string
	Key       string
	Amount    int64
}

func (m *Module[TTx]) journalStream(cutoff time.Time) *pageStream[journalRow] {
	return &pageStream[journalRow]{fetch: func(ctx context.Context, last *journalRow) ([]journalRow, error) {
		after, id := "", int64(0)
		if last != nil {
			after, id = last.PaymentNo, last.ID
		}
		rows, err := m.db.Query(ctx, m.q.Get("JournalPaymentPage"), cutoff, after, id, reconPage)
		list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (journalRow, error) {
			var j journalRow
			err := r.Scan(&j.ID, &j.PaymentNo, &j.Key, &j.Amount)
			return j, err
		})
		if err != nil {
			return nil, fmt.Errorf("reading the ledger after %q: %w", after, err)
		}
		return list, nil
	}}
}

// ledgerOf advances the journal (in payment-number order) to payment no,
// the merge's current key, and sums its capture (and late receipt) entries
// and its capture's reversal; entries of numbers before it (of no payment
// the merge has) are passed over.
func ledgerOf(ctx context.Context, journal *pageStream[journalRow], no string) (booked, reversed int64, err error) {
	capture, late, reversal := "payment:"+no+":capture", "payment:"+no+":late", "payment:"+no+":capture:reversal"
	for {
		j, err := journal.peek(ctx)
		if err != nil || j == nil || j.PaymentNo > no {
			return booked, reversed, err
		}
		if j.PaymentNo == no {
			switch j.Key {
			case capture, late:
				booked += j.Amount
			case reversal:
				reversed += j.Amount
			}
		}
		journal.next()
	}
}

func (m *Module[TTx]) refundStream(cutoff time.Time) *pageStream[ourRefund] {
	return &pageStream[ourRefund]{fetch: func(ctx context.Context, last *ourRefund) ([]ourRefund, error) {
		after := ""
		if last != nil {
			after = last.No
		}
		rows, err := m.db.Query(ctx, m.q.Get("ReconRefundPage"), cutoff, after, reconPage)
		list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (ourRefund, error) {
			var x ourRefund
			err := r.Scan(&x.No, &x.PaymentNo, &x.Amount, &x.Currency, &x.State, &x.UpdatedAt, &x.Channel, &x.Merchant, &x.Booked)
			return x, err
		})
		if err != nil {
			return nil, fmt.Errorf("reading the refunds after %q: %w", after, err)
		}
		return list, nil
	}}
}

// billEvidence is the channel's side of a discrepancy: the first line's
// fields and every line.
func billEvidence(lines []billRow) map[string]any {
	b := lines[0]
	ls := make([]map[string]any, len(lines))
	for i, l := range lines {
		ls[i] = map[string]any{"day": l.Day, "transaction_id": l.Txn, "refund_id": l.RefundID, "amount_minor": l.Amount,
			"fee_minor": l.Fee, "currency": l.Currency, "state": l.State, "at": l.At.UTC()}
	}
	return map[string]any{"payment_no": b.PaymentNo, "refund_no": b.RefundNo, "transaction_id": b.Txn,
		"merchant_id": b.Merchant, "amount_minor": b.Amount, "currency": b.Currency, "state": b.State,
		"lines": len(lines), "rows": ls}
}

// actionOf is the action named in a suggestion ("… (heal) [fingerprint]").
func actionOf(s string) string {
	i := strings.LastIndex(s, "(")
	j := strings.LastIndex(s, ")")
	if i < 0 || j < i {
		return ""
	}
	return s[i+1 : j]
}

func fingerprintOf(s string) string {
	i := strings.LastIndex(s, "[")
	if i < 0 || !strings.HasSuffix(s, "]") {
		return ""
	}
	return s[i+1 : len(s)-1]
}

// executeChannel performs a channel discrepancy's action in tx (the
// transaction that marks it executed), once per action id.
func (m *Module[TTx]) executeChannel(ctx context.Context, tx keelsql.Tx[TTx], d *keelrecon.DiscrepancyRow, actionID string) error {
	kind, subject, _ := strings.Cut(d.Key, ":")
	act := actionOf(d.SuggestedAction)
	now := m.Now()
	switch act {
	case actHeal:
		if kind == "refund" {
			return m.healRefund(ctx, tx, subject, d, actionID)
		}
		p, err := m.paymentIn(ctx, tx, subject)
		if err != nil {
			return err
		}
		cl, err := m.channelOf(p)
		if err != nil {
			return err
		}
		// Only the channel's own answer heals: the bill line alone does not.
		n, err := cl.QueryPayment(ctx, subject)
		if err != nil {
			return fmt.Errorf("querying %s before healing: %w", subject, err)
		}
		if n.State != channel.StatePaid {
			return fmt.Errorf("%w: the channel says %s is %s", keeltype.ErrInvalidState, subject, n.State)
		}
		if n.Channel == "" {
			n.Channel = channel.Kind(p.Channel)
		}
		n.Event = channel.EventPayment
		outcome, detail, err := m.applyPayment(ctx, tx, n, evidence{source: "recon", body: "(query answer, " + actionID + ")", at: now})
		if err != nil {
			return err
		}
		if outcome == OutcomeMismatch {
			return fmt.Errorf("%w: the channel's answer disagrees: %s", keeltype.ErrInvalidState, detail)
		}
		return m.compensation(ctx, tx, d, actionID, "heal", outcome)
	case actBook:
		p, err := m.paymentIn(ctx, tx, subject)
		if err != nil {
			return err
		}
		// The original event's id: the consumer's later delivery finds the
		// entry booked and books nothing.
		if _, err := m.post(ctx, tx, &Entry{Key: "payment:" + p.PaymentNo + ":capture", Subject: "payment:" + p.PaymentNo,
			Action: "capture", PaymentNo: p.PaymentNo, EventID: "payment:" + p.PaymentNo + ":succeeded",
			Amount: p.AmountMinor, Currency: p.Currency, Debit: AccClearing, Credit: AccPayable}); err != nil {
			return err
		}
		return m.compensation(ctx, tx, d, actionID, "book", "")
	case actOrder:
		var no string
		if err := tx.QueryRow(ctx, m.q.Get("PaymentPaidOfOrder"), subject).Scan(&no); err != nil {
			return fmt.Errorf("finding the paid payment of order %s: %w", subject, err)
		}
		if _, err := tx.Exec(ctx, m.q.Get("OrderMarkPaid"), subject, no, "payment:"+no+":succeeded", now); err != nil {
			return err
		}
		return m.compensation(ctx, tx, d, actionID, "order", "")
	case actReverse:
		p, err := m.paymentIn(ctx, tx, subject)
		if err != nil {
			return err
		}
		if _, err := m.post(ctx, tx, &Entry{Key: "payment:" + p.PaymentNo + ":capture:reversal", Subject: "payment:" + p.PaymentNo,
			Action: "capture_reversal", PaymentNo: p.PaymentNo, EventID: actionID, Amount: p.AmountMinor, Currency: p.Currency,
			Debit: AccPayable, Credit: AccClearing, Reverses: -1}); err != nil {
			return err
		}
		return m.compensation(ctx, tx, d, actionID, "reverse", "")
	case actRefund:
		p, err := m.paymentIn(ctx, tx, subject)
		if err != nil {
			return err
		}
		var txn string
		var ev struct {
			TransactionID string `json:"transaction_id"`
		}
		if err := json.Unmarshal(d.Evidence["channel"], &ev); err == nil {
			txn = ev.TransactionID
		}
		if txn == "" {
			return fmt.Errorf("%w: no channel transaction in the evidence", keeltype.ErrInvalidState)
		}
		// The late success is applied as if its callback had come (已关闭 →
		// 人工核验, its event), then refunded under the action id as the
		// refund's request id: a second execution finds the same refund.
		n := &channel.Notice{Channel: channel.Kind(p.Channel), Event: channel.EventPayment, MerchantID: p.MerchantID,
			AppID: p.AppID, OutTradeNo: p.PaymentNo, TransactionID: txn, AmountMinor: p.AmountMinor, Currency: p.Currency,
			State: channel.StatePaid, At: now}
		if _, _, err := m.applyPayment(ctx, tx, n, evidence{source: "recon", body: "(bill line, " + actionID + ")", at: now}); err != nil {
			return err
		}
		cur, err := m.paymentIn(ctx, tx, subject)
		if err != nil {
			return err
		}
		c := m.Engine().Load()
		if c == nil {
			return ErrNotStartedYet
		}
		if m.set.LatePolicy != LateRefund {
			if _, err := m.startRefundTx(ctx, c, tx, cur, RefundRequest{RequestID: strings.ReplaceAll(actionID, "/", "-"),
				AmountMinor: cur.AmountMinor, Reason: "对账: 关闭后到账原路退回"}, now); err != nil {
				return err
			}
		}
		return m.compensation(ctx, tx, d, actionID, "refund", "")
	default:
		// 人工核实: the operator's finding on exactly this evidence.
		_, err := tx.Exec(ctx, m.q.Get("CompensationInsert"), actionID, d.ID, "adjudicate", d.Key, d.Impact, d.Currency,
			fingerprintOf(d.SuggestedAction), actorOr(ctx, keelrecon.SystemActor), now)
		return err
	}
}

func (m *Module[TTx]) healRefund(ctx context.Context, tx keelsql.Tx[TTx], no string, d *keelrecon.DiscrepancyRow, actionID string) error {
	r, err := m.refundIn(ctx, tx, no)
	if err != nil {
		return err
	}
	p, err := m.paymentIn(ctx, tx, r.PaymentNo)
	if err != nil {
		return err
	}
	cl, err := m.channelOf(p)
	if err != nil {
		return err
	}
	n, err := cl.QueryRefund(ctx, r.PaymentNo, r.RefundNo)
	if err != nil {
		return fmt.Errorf("querying refund %s before healing: %w", no, err)
	}
	if n.State != channel.StateRefunded {
		return fmt.Errorf("%w: the channel says refund %s is %s", keeltype.ErrInvalidState, no, n.State)
	}
	if _, err := m.settleRefund(ctx, tx, r, r.State, "reconciliation: channel confirmed the refund", n.RefundID); err != nil {
		return err
	}
	return m.compensation(ctx, tx, d, actionID, "heal_refund", "")
}

var _ = errors.New
