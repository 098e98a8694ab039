package payment

import (
	"context"
	"regexp"
	"time"

	"github.com/keelwork/keel/keelsql"
)

// numberRE40 accepts payment and refund numbers (a refund's adds R and
// two digits to its payment's).
var numberRE40 = regexp.MustCompile(`^[A-Za-z0-9_-]{6,40}$`)

// Callback is one verified callback (or query answer) as evidence.
type Callback struct {
	ID            int64     `json:"id"`
	Channel       string    `json:"channel"`
	Event         string    `json:"event"`
	NotifyID      string    `json:"notify_id"`
	PaymentNo     string    `json:"payment_no"`
	RefundNo      string    `json:"refund_no,omitempty"`
	TransactionID string    `json:"transaction_id"`
	AmountMinor   int64     `json:"amount_minor"`
	Currency      string    `json:"currency"`
	Outcome       string    `json:"outcome"`
	Detail        string    `json:"detail,omitempty"`
	Digest        string    `json:"sha256"`
	Body          string    `json:"body"`
	ReceivedAt    time.Time `json:"received_at"`
}

// Callbacks lists a payment's callback evidence, oldest first.
func (m *Module[TTx]) Callbacks(ctx context.Context, no string) ([]Callback, error) {
	rows, err := m.db.Query(ctx, m.q.Get("CallbackList"), no)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Callback, error) {
		var c Callback
		err := r.Scan(&c.ID, &c.Channel, &c.Event, &c.NotifyID, &c.PaymentNo, &c.RefundNo, &c.TransactionID, &c.AmountMinor,
			&c.Currency, &c.Outcome, &c.Detail, &c.Digest, &c.Body, &c.ReceivedAt)
		return c, err
	})
}

// Refused is one row of the security audit.
type Refused struct {
	ID         int64     `json:"id"`
	Channel    string    `json:"channel"`
	Reason     string    `json:"reason"`
	Detail     string    `json:"detail"`
	Digest     string    `json:"sha256"`
	Body       string    `json:"body"`
	Remote     string    `json:"remote"`
	ReceivedAt time.Time `json:"received_at"`
}

// SecurityAudit lists refused callbacks, newest first.
func (m *Module[TTx]) SecurityAudit(ctx context.Context, before int64, limit int) ([]Refused, error) {
	if limit <= 0 || limit > 500 {
		limit = 50
	}
	rows, err := m.db.Query(ctx, m.q.Get("SecurityList"), before, limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Refused, error) {
		var x Refused
		err := r.Scan(&x.ID, &x.Channel, &x.Reason, &x.Detail, &x.Digest, &x.Body, &x.Remote, &x.ReceivedAt)
		return x, err
	})
}
