package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/modules/payment/channel"
)

// Refund is one refund of a payment, under its stable refund number.
type Refund struct {
	RefundNo        string     `json:"refund_no"`
	PaymentNo       string     `json:"payment_no"`
	RequestID       string     `json:"request_id"`
	AmountMinor     int64      `json:"amount_minor"`
	Currency        string     `json:"currency"`
	State           string     `json:"state"`
	Reason          string     `json:"reason"`
	ChannelRefundID string     `json:"channel_refund_id,omitempty"`
	Calls           int        `json:"calls"`
	Queries         int        `json:"queries"`
	Version         int64      `json:"version"`
	UnknownSince    *time.Time `json:"unknown_since,omitempty"`
	LastError       string     `json:"last_error,omitempty"`
	CreatedBy       string     `json:"created_by"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
}

// RefundEvent is the payload of the refund events.
type RefundEvent struct {
	RefundNo    string `json:"refund_no"`
	PaymentNo   string `json:"payment_no"`
	AmountMinor int64  `json:"amount_minor"`
	Currency    string `json:"currency"`
	// Late: the refund returns money that arrived for a closed order
	// (booked against late receipts, not the merchant's payable).
	Late bool `json:"late,omitempty"`
}

// RefundRequest asks for a refund. RequestID is the caller's idempotency
// key: the same request id on the same payment always finds the same
// refund (and its number), never a second one.
type RefundRequest struct {
	RequestID   string `json:"request_id"`
	AmountMinor int64  `json:"amount_minor"`
	Reason      string `json:"reason"`
}

var requestRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// RefundCallArgs is the job that calls the channel's refund with the
// refund's number.
type RefundCallArgs struct {
	RefundNo string `json:"refund_no"`
	Call     int    `json:"call"`
}

// Kind implements keel.JobArgs.
func (RefundCallArgs) Kind() string { return "payment.refund.call" }

// RefundQueryArgs is the job that queries a refund whose outcome is
// unknown (or still processing at the channel).
type RefundQueryArgs struct {
	RefundNo string `json:"refund_no"`
	N        int    `json:"n"`
}

// Kind implements keel.JobArgs.
func (RefundQueryArgs) Kind() string { return "payment.refund.query" }

// CreateRefund creates a refund (or finds the one of the same request).
// The amount is reserved against what is left of the payment in the same
// conditional update, so the refunds never exceed the amount paid.
func (m *Module[TTx]) CreateRefund(ctx context.Context, paymentNo string, rr RefundRequest) (*Refund, error) {
	switch {
	case !requestRE.MatchString(rr.RequestID):
		return nil, perr(ErrInvalid, "request_id must be 1 to 64 letters, digits or _.:-")
	case !validAmount(rr.AmountMinor):
		return nil, perr(ErrInvalid, "amount_minor must be between 1 and %d", int64(maxAmount))
	case !utf8.ValidString(rr.Reason) || utf8.RuneCountInString(rr.Reason) > 80:
		return nil, perr(ErrInvalid, "reason must be UTF-8, at most 80 characters")
	}
	c, err := m.Client()
	if err != nil {
		return nil, err
	}
	if r, err := m.refundByRequest(ctx, paymentNo, rr); r != nil || err != nil {
		return r, err
	}
	var refundNo string
	now := m.Now()
	err = m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		p, err := m.paymentIn(ctx, tx, paymentNo)
		if err != nil {
			return err
		}
		refundNo, err = m.startRefundTx(ctx, c, tx, p, rr, now)
		return err
	})
	if err != nil {
		// A concurrent request with the same id inserted first: its
		// refund is this request's.
		if r, rerr := m.refundByRequest(ctx, paymentNo, rr); r != nil && rerr == nil {
			return r, nil
		}
		return nil, err
	}
	return m.Refund(ctx, refundNo)
}

func (m *Module[TTx]) refundByRequest(ctx context.Context, paymentNo string, rr RefundRequest) (*Refund, error) {
	var no string
	err := m.db.QueryRow(ctx, m.q.Get("RefundByRequest"), paymentNo, rr.RequestID).Scan(&no)
	if errors.Is(err, keelsql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r, err := m.Refund(ctx, no)
	if err != nil {
		return nil, err
	}
	if r.AmountMinor != rr.AmountMinor {
		return nil, perr(ErrRequestConflict, "request %s is refund %s of %d", rr.RequestID, r.RefundNo, r.AmountMinor)
	}
	return r, nil
}

// startRefundTx reserves the amount, inserts the refund with its number,
// emits its start and inserts its first channel call, all in tx.
func (m *Module[TTx]) startRefundTx(ctx context.Context, c *keel.Client[TTx], tx keelsql.Tx[TTx], p *Payment, rr RefundRequest, now time.Time) (string, error) {
	if p.State != PayPaid && p.State != PayManual {
		return "", perr(ErrNotRefundable, "payment %s is %s", p.PaymentNo, p.State)
	}
	var count int
	err := tx.QueryRow(ctx, m.q.Get("PaymentReserveRefund"), p.PaymentNo, rr.AmountMinor, now, p.Currency).Scan(&count)
	if errors.Is(err, keelsql.ErrNoRows) {
		return "", perr(ErrRefundExceeds, "payment %s: %d of %d reserved for refunds, %d more would exceed it",
			p.PaymentNo, p.RefundReserved, p.AmountMinor, rr.AmountMinor)
	}
	if err != nil {
		return "", fmt.Errorf("reserving refund: %w", err)
	}
	// The number is the payment's and the refund's ordinal: stable, and
	// what the channel deduplicates on.
	no := fmt.Sprintf("%sR%02d", p.PaymentNo, count)
	actor := actorOr(ctx, "system:payment")
	if _, err := tx.Exec(ctx, m.q.Get("RefundInsert"), no, p.PaymentNo, rr.RequestID, rr.AmountMinor, p.Currency,
		rr.Reason, actor, now); err != nil {
		return "", fmt.Errorf("inserting refund %s: %w", no, err)
	}
	if err := m.history(ctx, tx, "RefundHistoryInsert", no, 1, "", RefundProcessing, "requested: "+rr.Reason, actor, now); err != nil {
		return "", err
	}
	ev := RefundEvent{RefundNo: no, PaymentNo: p.PaymentNo, AmountMinor: rr.AmountMinor, Currency: p.Currency, Late: p.State == PayManual}
	if err := m.emitRefund(ctx, tx, TopicRefundStarted, "started", ev); err != nil {
		return "", err
	}
	_, err = c.InsertTx(ctx, tx.Native(), RefundCallArgs{RefundNo: no, Call: 1},
		&keel.InsertOpts{IdempotencyKey: "refund-call:" + no + ":1", MaxAttempts: 5})
	return no, err
}

// refundLateTx refunds a late success in full (policy LateRefund).
func (m *Module[TTx]) refundLateTx(ctx context.Context, tx keelsql.Tx[TTx], p *Payment, txn string) (string, error) {
	c := m.Engine().Load()
	if c == nil {
		return "", errors.New("payment: late refund before start")
	}
	p.State = PayManual
	return m.startRefundTx(ctx, c, tx, p, RefundRequest{RequestID: "late-success", AmountMinor: p.AmountMinor,
		Reason: "关闭后到账, 按策略原路退回 " + txn}, m.Now())
}

func (m *Module[TTx]) emitRefund(ctx context.Context, tx keelsql.Tx[TTx], topic, action string, ev RefundEvent) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return m.ev.EmitTx(ctx, tx, keelevents.Event{Topic: topic, ID: "refund:" + ev.RefundNo + ":" + action,
		Key: ev.PaymentNo, Payload: body})
}

func scanRefund(r interface{ Scan(...any) error }) (*Refund, error) {
	var x Refund
	err := r.Scan(&x.RefundNo, &x.PaymentNo, &x.RequestID, &x.AmountMinor, &x.Currency, &x.State, &x.Reason,
		&x.ChannelRefundID, &x.Calls, &x.Queries, &x.Version, &x.UnknownSince, &x.LastError, &x.CreatedBy,
		&x.CreatedAt, &x.UpdatedAt)
	return &x, err
}

func (m *Module[TTx]) refundIn(ctx context.Context, q keelsql.Querier, no string) (*Refund, error) {
	r, err := scanRefund(q.QueryRow(ctx, m.q.Get("RefundGet"), no))
	if errors.Is(err, keelsql.ErrNoRows) {
		return nil, perr(ErrNoRefund, "%s", no)
	}
	if err != nil {
		return nil, fmt.Errorf("reading refund %s: %w", no, err)
	}
	return r, nil
}

// Refund reads one refund.
func (m *Module[TTx]) Refund(ctx context.Context, no string) (*Refund, error) {
	return m.refundIn(ctx, m.db, no)
}

// Refunds lists refunds by state and payment, newest number first.
func (m *Module[TTx]) Refunds(ctx context.Context, state, paymentNo, before string, limit int) ([]*Refund, error) {
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	rows, err := m.db.Query(ctx, m.q.Get("RefundList"), state, paymentNo, before, limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (*Refund, error) { return scanRefund(r) })
}

// RefundHistory is a refund's state history.
func (m *Module[TTx]) RefundHistory(ctx context.Context, no string) ([]Transition, error) {
	return m.transitions(ctx, "RefundHistory", no)
}

// moveRefund is one conditional move with its history.
func (m *Module[TTx]) moveRefund(ctx context.Context, tx keelsql.Tx[TTx], r *Refund, from, to, reason, lastErr, channelID string) (bool, error) {
	now := m.Now()
	var version int64
	err := tx.QueryRow(ctx, m.q.Get("RefundMove"), r.RefundNo, from, to, now, clipErr(lastErr), channelID).Scan(&version)
	if errors.Is(err, keelsql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("moving refund %s: %w", r.RefundNo, err)
	}
	return true, m.history(ctx, tx, "RefundHistoryInsert", r.RefundNo, version, from, to, reason, actorOr(ctx, "system:payment"), now)
}

func clipErr(s string) string {
	if len(s) > 500 {
		return s[:500]
	}
	return s
}

// settleRefund: the channel confirmed the refund.
func (m *Module[TTx]) settleRefund(ctx context.Context, tx keelsql.Tx[TTx], r *Refund, from, reason, channelID string) (bool, error) {
	ok, err := m.moveRefund(ctx, tx, r, from, RefundDone, reason, "", channelID)
	if err != nil || !ok {
		return ok, err
	}
	if n, err := tx.Exec(ctx, m.q.Get("PaymentRefunded"), r.PaymentNo, r.AmountMinor, m.Now()); err != nil || n == 0 {
		return false, fmt.Errorf("settling refund %s on its payment: %v", r.RefundNo, err)
	}
	p, err := m.paymentIn(ctx, tx, r.PaymentNo)
	if err != nil {
		return false, err
	}
	return true, m.emitRefund(ctx, tx, TopicRefundDone, "succeeded", RefundEvent{RefundNo: r.RefundNo, PaymentNo: r.PaymentNo,
		AmountMinor: r.AmountMinor, Currency: r.Currency, Late: p.State == PayManual})
}

// failRefund: the channel refused the refund (a permanent business
// refusal); the amount is free again and the ledger reverses the start.
func (m *Module[TTx]) failRefund(ctx context.Context, tx keelsql.Tx[TTx], r *Refund, from, reason string) error {
	ok, err := m.moveRefund(ctx, tx, r, from, RefundFailed, reason, reason, "")
	if err != nil || !ok {
		return err
	}
	if _, err := tx.Exec(ctx, m.q.Get("PaymentReleaseRefund"), r.PaymentNo, r.AmountMinor, m.Now()); err != nil {
		return err
	}
	p, err := m.paymentIn(ctx, tx, r.PaymentNo)
	if err != nil {
		return err
	}
	return m.emitRefund(ctx, tx, TopicRefundFailed, "failed", RefundEvent{RefundNo: r.RefundNo, PaymentNo: r.PaymentNo,
		AmountMinor: r.AmountMinor, Currency: r.Currency, Late: p.State == PayManual})
}

// backoff is the wait before query n (1-based), doubling, scaled.
func (m *Module[TTx]) backoff(n int) time.Duration {
	d := m.set.RefundBackoff
	for i := 1; i < n && d < m.set.RefundBackoffMax; i++ {
		d *= 2
	}
	return m.set.scaled(min(d, m.set.RefundBackoffMax))
}

func (m *Module[TTx]) scheduleQuery(ctx context.Context, tx keelsql.Tx[TTx], no string, n int) error {
	c := m.Engine().Load()
	if c == nil {
		return ErrNotStartedYet
	}
	_, err := c.InsertTx(ctx, tx.Native(), RefundQueryArgs{RefundNo: no, N: n},
		&keel.InsertOpts{Delay: m.backoff(n), IdempotencyKey: fmt.Sprintf("refund-query:%s:%d", no, n), MaxAttempts: 5})
	return err
}

// ErrNotStartedYet: background work asked for before Start.
var ErrNotStartedYet = errors.New("payment: not started")

func (m *Module[TTx]) channelOf(p *Payment) (channel.Client, error) {
	mc, ok := m.merchant(channel.Kind(p.Channel))
	if !ok || mc.Channel == nil || mc.Channel.Client == nil {
		return nil, perr(ErrNoChannel, "%s", p.Channel)
	}
	return mc.Channel.Client, nil
}

// workRefundCall calls the channel's refund with the refund's number. A
// second attempt of this job (the process died during the call) does not
// call again: it cannot know whether the first call executed, so it
// queries first.
func (m *Module[TTx]) workRefundCall(ctx context.Context, job *keel.Job[RefundCallArgs]) error {
	r, err := m.Refund(ctx, job.Args.RefundNo)
	if err != nil || r.State != RefundProcessing {
		return err
	}
	p, err := m.Payment(ctx, r.PaymentNo)
	if err != nil {
		return err
	}
	if job.Attempt > 1 {
		return m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
			ok, err := m.moveRefund(ctx, tx, r, RefundProcessing, RefundUnknown, "call interrupted: query first", "interrupted", "")
			if err != nil || !ok {
				return err
			}
			return m.scheduleQuery(ctx, tx, r.RefundNo, 1)
		})
	}
	cl, err := m.channelOf(p)
	if err != nil {
		return err
	}
	var calls int
	if err := m.db.QueryRow(ctx, m.q.Get("RefundCalled"), r.RefundNo, m.Now()).Scan(&calls); err != nil {
		if errors.Is(err, keelsql.ErrNoRows) {
			return nil
		}
		return err
	}
	n, callErr := cl.Refund(ctx, channel.RefundRequest{OutTradeNo: p.PaymentNo, OutRefundNo: r.RefundNo,
		AmountMinor: r.AmountMinor, TotalMinor: p.AmountMinor, Currency: r.Currency, Reason: r.Reason})
	return m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		switch {
		case callErr == nil && n != nil && n.State == channel.StateRefunded:
			_, err := m.settleRefund(ctx, tx, r, RefundProcessing, "channel confirmed the refund", n.RefundID)
			return err
		case callErr == nil && n != nil && n.State == channel.StateRefundFail,
			errors.Is(callErr, channel.ErrRejected):
			return m.failRefund(ctx, tx, r, RefundProcessing, "channel refused: "+errText(callErr))
		case callErr == nil:
			// Accepted, processing: query for the result.
			return m.scheduleQuery(ctx, tx, r.RefundNo, 1)
		default:
			// Timeout, 5xx, lost connection: it may have executed.
			ok, err := m.moveRefund(ctx, tx, r, RefundProcessing, RefundUnknown, "refund call outcome unknown", errText(callErr), "")
			if err != nil || !ok {
				return err
			}
			return m.scheduleQuery(ctx, tx, r.RefundNo, 1)
		}
	})
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// workRefundQuery queries a refund with its own number: confirmed →
// 已退款; proven not executed → the same number is called again (within
// the call budget); still unknown → queried again later, and past the
// horizon → 人工核验.
func (m *Module[TTx]) workRefundQuery(ctx context.Context, job *keel.Job[RefundQueryArgs]) error {
	r, err := m.Refund(ctx, job.Args.RefundNo)
	if err != nil || (r.State != RefundUnknown && r.State != RefundProcessing) {
		return err
	}
	p, err := m.Payment(ctx, r.PaymentNo)
	if err != nil {
		return err
	}
	cl, err := m.channelOf(p)
	if err != nil {
		return err
	}
	if _, err := m.db.Exec(ctx, m.q.Get("RefundQueried"), r.RefundNo, m.Now()); err != nil {
		return err
	}
	n, qErr := cl.QueryRefund(ctx, p.PaymentNo, r.RefundNo)
	next := job.Args.N + 1
	return m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		switch {
		case qErr == nil && n != nil && n.State == channel.StateRefunded:
			_, err := m.settleRefund(ctx, tx, r, r.State, "query confirmed the refund", n.RefundID)
			return err
		case errors.Is(qErr, channel.ErrNotFound) || (qErr == nil && n != nil && n.State == channel.StateRefundFail):
			// Proven not executed: only now may the same number be sent again.
			if r.Calls >= m.set.RefundMaxCalls {
				_, err := m.moveRefund(ctx, tx, r, r.State, RefundManual, "not executed, call budget spent", "not executed", "")
				return err
			}
			if r.State == RefundUnknown {
				ok, err := m.moveRefund(ctx, tx, r, RefundUnknown, RefundProcessing, "query proved it not executed: retry with the same number", "", "")
				if err != nil || !ok {
					return err
				}
			}
			c := m.Engine().Load()
			_, err := c.InsertTx(ctx, tx.Native(), RefundCallArgs{RefundNo: r.RefundNo, Call: r.Calls + 1},
				&keel.InsertOpts{IdempotencyKey: fmt.Sprintf("refund-call:%s:%d", r.RefundNo, r.Calls+1), MaxAttempts: 5})
			return err
		default:
			// Still processing at the channel, or the query itself failed.
			since := r.UpdatedAt
			if r.UnknownSince != nil {
				since = *r.UnknownSince
			}
			if m.Now().Sub(since) > m.set.scaled(m.set.RefundHorizon) {
				_, err := m.moveRefund(ctx, tx, r, r.State, RefundManual, "outcome still unknown past the horizon", errText(qErr), "")
				return err
			}
			return m.scheduleQuery(ctx, tx, r.RefundNo, next)
		}
	})
}

// applyRefundNotice applies a verified refund callback.
func (m *Module[TTx]) applyRefundNotice(ctx context.Context, tx keelsql.Tx[TTx], n *channel.Notice, ev evidence) (string, string, error) {
	r, err := m.refundIn(ctx, tx, n.OutRefundNo)
	if err != nil {
		return "", "", err
	}
	outcome, detail := OutcomeIgnored, "channel state "+string(n.State)
	switch {
	case r.PaymentNo != n.OutTradeNo || r.AmountMinor != n.AmountMinor || r.Currency != n.Currency:
		outcome, detail = OutcomeMismatch, fmt.Sprintf("refund %s of %d %s on %s, notice says %d %s on %s",
			r.RefundNo, r.AmountMinor, r.Currency, r.PaymentNo, n.AmountMinor, n.Currency, n.OutTradeNo)
	case n.State == channel.StateRefunded && r.State == RefundDone:
		outcome, detail = OutcomeDuplicate, ""
	case n.State == channel.StateRefunded:
		ok, err := m.settleRefund(ctx, tx, r, r.State, "refund callback", n.RefundID)
		if err != nil {
			return "", "", err
		}
		if ok {
			outcome, detail = OutcomeApplied, ""
		}
	}
	if _, err := tx.Exec(ctx, m.q.Get("CallbackInsert"), string(n.Channel), string(n.Event), n.NotifyID, n.OutTradeNo,
		n.OutRefundNo, n.TransactionID, n.AmountMinor, n.Currency, outcome, detail, ev.digest, ev.body, ev.at); err != nil {
		return "", "", fmt.Errorf("recording callback evidence: %w", err)
	}
	return outcome, detail, nil
}
