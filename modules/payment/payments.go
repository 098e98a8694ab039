package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/modules/payment/channel"
)

// Topics of the module's events.
const (
	TopicPaid          = "payment.succeeded"
	TopicLate          = "payment.late_success"
	TopicRefundStarted = "payment.refund.started"
	TopicRefundDone    = "payment.refund.succeeded"
	TopicRefundFailed  = "payment.refund.failed"
)

// Payment is a payment order.
type Payment struct {
	PaymentNo      string     `json:"payment_no"`
	OrderID        string     `json:"order_id"`
	Channel        string     `json:"channel"`
	MerchantID     string     `json:"merchant_id"`
	AppID          string     `json:"app_id"`
	AmountMinor    int64      `json:"amount_minor"`
	Currency       string     `json:"currency"`
	State          string     `json:"state"`
	TransactionID  string     `json:"transaction_id,omitempty"`
	RefundReserved int64      `json:"refund_reserved_minor"`
	RefundedMinor  int64      `json:"refunded_minor"`
	RefundCount    int        `json:"refund_count"`
	Version        int64      `json:"version"`
	Source         string     `json:"source,omitempty"`
	ExpiresAt      time.Time  `json:"expires_at"`
	QueryAfter     time.Time  `json:"query_after"`
	Queries        int        `json:"queries"`
	PaidAt         *time.Time `json:"paid_at,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

// Transition is one line of a state history.
type Transition struct {
	Version int64     `json:"version"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	Reason  string    `json:"reason"`
	Actor   string    `json:"actor"`
	At      time.Time `json:"at"`
}

// PaymentEvent is the payload of the payment events.
type PaymentEvent struct {
	PaymentNo     string    `json:"payment_no"`
	OrderID       string    `json:"order_id"`
	Channel       string    `json:"channel"`
	MerchantID    string    `json:"merchant_id"`
	TransactionID string    `json:"transaction_id"`
	AmountMinor   int64     `json:"amount_minor"`
	Currency      string    `json:"currency"`
	At            time.Time `json:"at"`
}

// Errors with stable problem codes.
var (
	ErrInvalid          = module.Errorf(http.StatusBadRequest, "payment_invalid", "invalid payment request")
	ErrNoPayment        = module.Errorf(http.StatusNotFound, "payment_not_found", "no such payment")
	ErrNoRefund         = module.Errorf(http.StatusNotFound, "refund_not_found", "no such refund")
	ErrNoChannel        = module.Errorf(http.StatusConflict, "payment_channel_unconfigured", "the channel is not configured")
	ErrNotRefundable    = module.Errorf(http.StatusConflict, "payment_not_refundable", "the payment is not in a state that can be refunded")
	ErrRefundExceeds    = module.Errorf(http.StatusConflict, "refund_exceeds_paid", "the refunds would exceed the amount paid")
	ErrRequestConflict  = module.Errorf(http.StatusConflict, "refund_request_conflict", "the request id was used for another refund")
	ErrPaymentDuplicate = module.Errorf(http.StatusConflict, "payment_exists", "the payment number exists with other fields")
)

var (
	numberRE   = regexp.MustCompile(`^[A-Za-z0-9_-]{6,32}$`)
	currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)
)

// maxAmount bounds an amount: far above any single payment, far below
// int64's limit, so sums of many never overflow.
const maxAmount = 1_000_000_000_000

func validAmount(a int64) bool { return a > 0 && a <= maxAmount }

// NewPayment is a payment order to create.
type NewPayment struct {
	PaymentNo   string `json:"payment_no"`
	OrderID     string `json:"order_id"`
	Channel     string `json:"channel"`
	AmountMinor int64  `json:"amount_minor"`
	Currency    string `json:"currency"`
}

func (np *NewPayment) check() error {
	switch {
	case !numberRE.MatchString(np.PaymentNo):
		return perr(ErrInvalid, "payment_no must be 6 to 32 letters, digits, '-' or '_'")
	case !numberRE.MatchString(np.OrderID):
		return perr(ErrInvalid, "order_id must be 6 to 32 letters, digits, '-' or '_'")
	case !validAmount(np.AmountMinor):
		return perr(ErrInvalid, "amount_minor must be between 1 and %d", int64(maxAmount))
	case !currencyRE.MatchString(np.Currency):
		return perr(ErrInvalid, "currency must be an ISO 4217 code")
	}
	return nil
}

// CreatePayment creates the business order (if new) and its payment
// order, pending. Creating the same payment again returns it; the same
// number with other fields is refused.
func (m *Module[TTx]) CreatePayment(ctx context.Context, np NewPayment) (*Payment, error) {
	if err := np.check(); err != nil {
		return nil, err
	}
	mc, ok := m.merchant(channel.Kind(np.Channel))
	if !ok {
		return nil, perr(ErrNoChannel, "%q", np.Channel)
	}
	now := m.Now()
	horizon := m.horizon(mc.Kind)
	err := m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		if _, err := tx.Exec(ctx, m.q.Get("OrderInsert"), np.OrderID, np.AmountMinor, np.Currency, now); err != nil {
			return fmt.Errorf("inserting order %s: %w", np.OrderID, err)
		}
		n, err := tx.Exec(ctx, m.q.Get("PaymentInsert"), np.PaymentNo, np.OrderID, np.Channel, mc.MerchantID, mc.AppID,
			np.AmountMinor, np.Currency, now.Add(m.set.scaled(m.set.PayTimeout)), now.Add(horizon), now)
		if err != nil {
			return fmt.Errorf("inserting payment %s: %w", np.PaymentNo, err)
		}
		if n == 0 {
			return nil
		}
		return m.history(ctx, tx, "PaymentHistoryInsert", np.PaymentNo, 1, "", PayPending, "created", keel.ActorFrom(ctx), now)
	})
	if err != nil {
		return nil, err
	}
	p, err := m.Payment(ctx, np.PaymentNo)
	if err != nil {
		return nil, err
	}
	if p.OrderID != np.OrderID || p.AmountMinor != np.AmountMinor || p.Currency != np.Currency || p.Channel != np.Channel {
		return nil, perr(ErrPaymentDuplicate, "%s", np.PaymentNo)
	}
	return p, nil
}

// horizon is how long the channel keeps calling back, scaled.
func (m *Module[TTx]) horizon(k channel.Kind) time.Duration {
	if k == channel.KindAlipay {
		return m.set.scaled(m.set.AlipayHorizon)
	}
	return m.set.scaled(m.set.WeChatHorizon)
}

func (m *Module[TTx]) history(ctx context.Context, q keelsql.Querier, stmt, no string, version int64, from, to, reason, actor string, at time.Time) error {
	if actor == "" {
		actor = "system:payment"
	}
	if _, err := q.Exec(ctx, m.q.Get(stmt), no, version, from, to, reason, actor, at); err != nil {
		return fmt.Errorf("recording history of %s: %w", no, err)
	}
	return nil
}

func scanPayment(r interface{ Scan(...any) error }) (*Payment, error) {
	var p Payment
	err := r.Scan(&p.PaymentNo, &p.OrderID, &p.Channel, &p.MerchantID, &p.AppID, &p.AmountMinor, &p.Currency, &p.State,
		&p.TransactionID, &p.RefundReserved, &p.RefundedMinor, &p.RefundCount, &p.Version, &p.Source,
		&p.ExpiresAt, &p.QueryAfter, &p.Queries, &p.PaidAt, &p.CreatedAt, &p.UpdatedAt)
	return &p, err
}

func (m *Module[TTx]) paymentIn(ctx context.Context, q keelsql.Querier, no string) (*Payment, error) {
	p, err := scanPayment(q.QueryRow(ctx, m.q.Get("PaymentGet"), no))
	if errors.Is(err, keelsql.ErrNoRows) {
		return nil, perr(ErrNoPayment, "%s", no)
	}
	if err != nil {
		return nil, fmt.Errorf("reading payment %s: %w", no, err)
	}
	return p, nil
}

// Payment reads one payment order.
func (m *Module[TTx]) Payment(ctx context.Context, no string) (*Payment, error) {
	return m.paymentIn(ctx, m.db, no)
}

// Payments lists payment orders, newest number first, before a cursor.
func (m *Module[TTx]) Payments(ctx context.Context, state, before string, limit int) ([]*Payment, error) {
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	rows, err := m.db.Query(ctx, m.q.Get("PaymentList"), state, before, limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (*Payment, error) { return scanPayment(r) })
}

// PaymentHistory is a payment's state history.
func (m *Module[TTx]) PaymentHistory(ctx context.Context, no string) ([]Transition, error) {
	return m.transitions(ctx, "PaymentHistory", no)
}

func (m *Module[TTx]) transitions(ctx context.Context, stmt, no string) ([]Transition, error) {
	rows, err := m.db.Query(ctx, m.q.Get(stmt), no)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Transition, error) {
		var t Transition
		err := r.Scan(&t.Version, &t.From, &t.To, &t.Reason, &t.Actor, &t.At)
		return t, err
	})
}

// Order is the module's business order.
type Order struct {
	ID          string     `json:"id"`
	AmountMinor int64      `json:"amount_minor"`
	Currency    string     `json:"currency"`
	State       string     `json:"state"`
	PaymentNo   string     `json:"payment_no,omitempty"`
	PaidEvent   string     `json:"paid_event,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	PaidAt      *time.Time `json:"paid_at,omitempty"`
}

// Order reads a business order.
func (m *Module[TTx]) Order(ctx context.Context, id string) (*Order, error) {
	var o Order
	err := m.db.QueryRow(ctx, m.q.Get("OrderGet"), id).Scan(&o.ID, &o.AmountMinor, &o.Currency, &o.State, &o.PaymentNo,
		&o.PaidEvent, &o.CreatedAt, &o.PaidAt)
	if errors.Is(err, keelsql.ErrNoRows) {
		return nil, fmt.Errorf("%w: order %s", keeltype.ErrNotFound, id)
	}
	return &o, err
}

// evidence is what a notice leaves as callback evidence.
type evidence struct {
	source string // "callback", "query", "recon"
	digest string
	body   string
	at     time.Time
}

// applyPayment applies a verified payment notice in tx: the conditional
// state move, its history, the evidence and the outbox event. It returns
// the outcome; the caller acknowledges applied, duplicate, late and
// ignored, and refuses mismatch. errUnknownPayment: no such payment.
func (m *Module[TTx]) applyPayment(ctx context.Context, tx keelsql.Tx[TTx], n *channel.Notice, ev evidence) (string, string, error) {
	p, err := m.paymentIn(ctx, tx, n.OutTradeNo)
	if err != nil {
		return "", "", err
	}
	outcome, detail, err := m.movePayment(ctx, tx, p, n, ev)
	if err != nil {
		return "", "", err
	}
	if _, err := tx.Exec(ctx, m.q.Get("CallbackInsert"), string(n.Channel), string(n.Event), n.NotifyID, n.OutTradeNo,
		n.OutRefundNo, n.TransactionID, n.AmountMinor, n.Currency, outcome, detail, ev.digest, ev.body, ev.at); err != nil {
		return "", "", fmt.Errorf("recording callback evidence: %w", err)
	}
	return outcome, detail, nil
}

func (m *Module[TTx]) movePayment(ctx context.Context, tx keelsql.Tx[TTx], p *Payment, n *channel.Notice, ev evidence) (string, string, error) {
	if d := disagreement(p, n); d != "" {
		return OutcomeMismatch, d, nil
	}
	if n.State != channel.StatePaid {
		return OutcomeIgnored, "channel state " + string(n.State), nil
	}
	if n.TransactionID == "" {
		return OutcomeMismatch, "no channel transaction id", nil
	}
	// One channel transaction pays one payment order: another order
	// holding this transaction id is a disagreement, not a success.
	var other string
	err := tx.QueryRow(ctx, m.q.Get("PaymentByTransaction"), n.TransactionID).Scan(&other)
	if err == nil && other != p.PaymentNo {
		return OutcomeMismatch, "transaction id already pays " + other, nil
	}
	if err != nil && !errors.Is(err, keelsql.ErrNoRows) {
		return "", "", err
	}
	at := n.At.UTC()
	if at.IsZero() {
		at = ev.at
	}
	var version int64
	err = tx.QueryRow(ctx, m.q.Get("PaymentSucceed"), p.PaymentNo, n.TransactionID, at, ev.source, ev.at,
		p.AmountMinor, p.Currency, p.MerchantID).Scan(&version)
	if err == nil {
		if err := m.history(ctx, tx, "PaymentHistoryInsert", p.PaymentNo, version, PayPending, PayPaid,
			ev.source+" "+n.TransactionID, actorOr(ctx, "channel:"+p.Channel), ev.at); err != nil {
			return "", "", err
		}
		return OutcomeApplied, "", m.emitPayment(ctx, tx, TopicPaid, "succeeded", p, n.TransactionID, at)
	}
	if !errors.Is(err, keelsql.ErrNoRows) {
		return "", "", fmt.Errorf("moving payment %s: %w", p.PaymentNo, err)
	}
	// Nothing matched: read what is there now and classify.
	cur, err := m.paymentIn(ctx, tx, p.PaymentNo)
	if err != nil {
		return "", "", err
	}
	switch {
	case (cur.State == PayPaid || cur.State == PayManual) && cur.TransactionID == n.TransactionID:
		return OutcomeDuplicate, "", nil
	case cur.State == PayPaid || cur.State == PayManual:
		return OutcomeMismatch, "paid already by transaction " + cur.TransactionID, nil
	case cur.State == PayClosed:
		err := tx.QueryRow(ctx, m.q.Get("PaymentLateSuccess"), p.PaymentNo, n.TransactionID, at, ev.source, ev.at,
			p.AmountMinor, p.Currency, p.MerchantID).Scan(&version)
		if errors.Is(err, keelsql.ErrNoRows) {
			return OutcomeDuplicate, "", nil
		}
		if err != nil {
			return "", "", fmt.Errorf("moving payment %s: %w", p.PaymentNo, err)
		}
		if err := m.history(ctx, tx, "PaymentHistoryInsert", p.PaymentNo, version, PayClosed, PayManual,
			"late success "+n.TransactionID+" after close", actorOr(ctx, "channel:"+p.Channel), ev.at); err != nil {
			return "", "", err
		}
		if err := m.emitPayment(ctx, tx, TopicLate, "late_success", p, n.TransactionID, at); err != nil {
			return "", "", err
		}
		if m.set.LatePolicy == LateRefund {
			if _, err := m.refundLateTx(ctx, tx, cur, n.TransactionID); err != nil {
				return "", "", err
			}
		}
		return OutcomeLate, "", nil
	}
	return OutcomeMismatch, "payment is " + cur.State, nil
}

// disagreement names the first field of a verified notice that differs
// from the payment order ("" when they agree).
func disagreement(p *Payment, n *channel.Notice) string {
	switch {
	case string(n.Channel) != p.Channel:
		return fmt.Sprintf("channel %s, order on %s", n.Channel, p.Channel)
	case n.MerchantID != p.MerchantID:
		return fmt.Sprintf("merchant %s, order's %s", n.MerchantID, p.MerchantID)
	case n.AppID != "" && p.AppID != "" && n.AppID != p.AppID:
		return fmt.Sprintf("app %s, order's %s", n.AppID, p.AppID)
	case n.State == channel.StatePaid && n.AmountMinor != p.AmountMinor:
		return fmt.Sprintf("amount %d, order's %d", n.AmountMinor, p.AmountMinor)
	case n.State == channel.StatePaid && n.Currency != p.Currency:
		return fmt.Sprintf("currency %s, order's %s", n.Currency, p.Currency)
	}
	return ""
}

func actorOr(ctx context.Context, def string) string {
	if a := keel.ActorFrom(ctx); a != "" {
		return a
	}
	return def
}

func (m *Module[TTx]) emitPayment(ctx context.Context, tx keelsql.Tx[TTx], topic, action string, p *Payment, txn string, at time.Time) error {
	body, err := json.Marshal(PaymentEvent{PaymentNo: p.PaymentNo, OrderID: p.OrderID, Channel: p.Channel,
		MerchantID: p.MerchantID, TransactionID: txn, AmountMinor: p.AmountMinor, Currency: p.Currency, At: at})
	if err != nil {
		return err
	}
	// The id names the business intent (this payment's success): a
	// redelivery, a replay or a heal from reconciliation all carry it.
	return m.ev.EmitTx(ctx, tx, keelevents.Event{Topic: topic, ID: "payment:" + p.PaymentNo + ":" + action,
		Key: p.PaymentNo, Payload: body})
}

// closePayment moves a pending payment to 已关闭 (the channel confirmed it
// unpaid and closed it).
func (m *Module[TTx]) closePayment(ctx context.Context, no, reason string) (bool, error) {
	now := m.Now()
	closed := false
	err := m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		var version int64
		err := tx.QueryRow(ctx, m.q.Get("PaymentClose"), no, "query", now).Scan(&version)
		if errors.Is(err, keelsql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		closed = true
		return m.history(ctx, tx, "PaymentHistoryInsert", no, version, PayPending, PayClosed, reason, actorOr(ctx, "system:payment"), now)
	})
	return closed, err
}
