package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
)

// The consumers' durable names.
const (
	ConsumerLedger = "payment-ledger"
	ConsumerOrders = "payment-orders"
)

// Accounts of the ledger.
const (
	AccClearing = "channel_clearing"  // asset: what the channel holds for us
	AccPayable  = "merchant_payable"  // liability: owed to the merchant
	AccInFlight = "refunds_in_flight" // liability: refunds asked of the channel, not yet confirmed
	AccFees     = "channel_fees"      // expense: the channel's fees
	AccLate     = "late_receipts"     // liability: money that arrived for a closed order
)

type accountType struct {
	kind          string // asset, liability, expense
	allowNegative bool
}

// accountTypes: none of the accounts may go below zero. A clearing
// account overdrawn means a refund settled for money the channel never
// reported receiving: the entry is refused and the event goes to manual.
var accountTypes = map[string]accountType{
	AccClearing: {"asset", false},
	AccPayable:  {"liability", false},
	AccInFlight: {"liability", false},
	AccFees:     {"expense", false},
	AccLate:     {"liability", false},
}

// normalDebit: the account's balance grows with debits.
func (a accountType) normalDebit() bool { return a.kind == "asset" || a.kind == "expense" }

// Entry is one balanced journal entry: Amount debited to Debit and
// credited to Credit.
type Entry struct {
	ID        int64     `json:"id"`
	Key       string    `json:"entry_key"`
	Subject   string    `json:"subject"`
	Action    string    `json:"action"`
	PaymentNo string    `json:"payment_no"`
	RefundNo  string    `json:"refund_no,omitempty"`
	EventID   string    `json:"event_id"`
	Amount    int64     `json:"amount_minor"`
	Currency  string    `json:"currency"`
	Reverses  int64     `json:"reverses,omitempty"`
	PostedAt  time.Time `json:"posted_at"`
	Debit     string    `json:"-"`
	Credit    string    `json:"-"`
}

var ensured sync.Map // "dialect/db account/currency" → true; AccountEnsure is idempotent anyway

// registerConsumers subscribes the ledger and the orders consumer. Both
// are ordered by payment number, so a refund's entries follow its
// payment's capture.
func (m *Module[TTx]) registerConsumers() error {
	if err := m.ev.Consume(keelevents.Consumer[TTx]{Name: ConsumerLedger, Topics: []string{"payment.>"}, Ordered: true,
		Handle: m.handleLedger}); err != nil {
		return err
	}
	return m.ev.Consume(keelevents.Consumer[TTx]{Name: ConsumerOrders, Topics: []string{TopicPaid}, Ordered: true,
		Handle: m.handleOrder})
}

// handleOrder marks the business order paid: conditional, so the same
// success twice (past the inbox) changes nothing.
func (m *Module[TTx]) handleOrder(ctx context.Context, tx keelsql.Tx[TTx], d *keelevents.Delivery) error {
	var ev PaymentEvent
	if err := json.Unmarshal(d.Payload, &ev); err != nil {
		return fmt.Errorf("decoding %s/%s: %w", d.Topic, d.ID, err)
	}
	_, err := tx.Exec(ctx, m.q.Get("OrderMarkPaid"), ev.OrderID, ev.PaymentNo, d.ID, m.Now())
	return err
}

// handleLedger posts the entry of one payment event.
func (m *Module[TTx]) handleLedger(ctx context.Context, tx keelsql.Tx[TTx], d *keelevents.Delivery) error {
	e, err := ledgerEntry(d)
	if err != nil {
		return err
	}
	if e == nil {
		return nil
	}
	_, err = m.post(ctx, tx, e)
	return err
}

// ledgerEntry maps an event to its entry (nil: the event books nothing).
func ledgerEntry(d *keelevents.Delivery) (*Entry, error) {
	switch d.Topic {
	case TopicPaid, TopicLate:
		var ev PaymentEvent
		if err := json.Unmarshal(d.Payload, &ev); err != nil {
			return nil, fmt.Errorf("decoding %s/%s: %w", d.Topic, d.ID, err)
		}
		e := &Entry{Key: "payment:" + ev.PaymentNo + ":capture", Subject: "payment:" + ev.PaymentNo, Action: "capture",
			PaymentNo: ev.PaymentNo, EventID: d.ID, Amount: ev.AmountMinor, Currency: ev.Currency,
			Debit: AccClearing, Credit: AccPayable}
		if d.Topic == TopicLate {
			e.Key, e.Action, e.Credit = "payment:"+ev.PaymentNo+":late", "late_receipt", AccLate
		}
		return e, nil
	case TopicRefundStarted, TopicRefundDone, TopicRefundFailed:
		var ev RefundEvent
		if err := json.Unmarshal(d.Payload, &ev); err != nil {
			return nil, fmt.Errorf("decoding %s/%s: %w", d.Topic, d.ID, err)
		}
		from := AccPayable
		if ev.Late {
			from = AccLate
		}
		e := &Entry{Subject: "refund:" + ev.RefundNo, PaymentNo: ev.PaymentNo, RefundNo: ev.RefundNo, EventID: d.ID,
			Amount: ev.AmountMinor, Currency: ev.Currency}
		switch d.Topic {
		case TopicRefundStarted:
			e.Key, e.Action, e.Debit, e.Credit = "refund:"+ev.RefundNo+":start", "refund_start", from, AccInFlight
		case TopicRefundDone:
			e.Key, e.Action, e.Debit, e.Credit = "refund:"+ev.RefundNo+":settle", "refund_settle", AccInFlight, AccClearing
		case TopicRefundFailed:
			// A correction is a reversing entry, never an edit: the start
			// entry stays, this one undoes it.
			e.Key, e.Action, e.Debit, e.Credit = "refund:"+ev.RefundNo+":start:reversal", "refund_reversal", AccInFlight, from
			e.Reverses = -1 // resolved from the start entry's key in post
		}
		return e, nil
	}
	return nil, nil
}

// errUnbalanced: an account would go below zero where its type forbids.
var errOverdrawn = errors.New("ledger: the entry would overdraw an account")

// post writes e and moves the two balances in tx. An entry whose key is
// already booked is not booked again; one booked with another amount is
// an error (a reused key: the event goes to manual, nothing is changed).
func (m *Module[TTx]) post(ctx context.Context, tx keelsql.Tx[TTx], e *Entry) (bool, error) {
	now := m.Now()
	var reverses any
	if e.Reverses != 0 {
		var id, amt int64
		var cur string
		err := tx.QueryRow(ctx, m.q.Get("JournalByKey"), reversedKey(e.Key)).Scan(&id, &amt, &cur)
		if errors.Is(err, keelsql.ErrNoRows) {
			return false, nil // nothing was booked: nothing to reverse
		}
		if err != nil {
			return false, err
		}
		reverses = id
	}
	var id int64
	err := tx.QueryRow(ctx, m.q.Get("JournalInsert"), e.Key, e.Subject, e.Action, e.PaymentNo, e.RefundNo, e.EventID,
		e.Amount, e.Currency, reverses, now).Scan(&id)
	if errors.Is(err, keelsql.ErrNoRows) {
		var oid, amt int64
		var cur string
		if err := tx.QueryRow(ctx, m.q.Get("JournalByKey"), e.Key).Scan(&oid, &amt, &cur); err != nil {
			return false, fmt.Errorf("reading entry %s: %w", e.Key, err)
		}
		if amt != e.Amount || cur != e.Currency {
			return false, fmt.Errorf("ledger: entry %s is booked with %d %s, the event says %d %s", e.Key, amt, cur, e.Amount, e.Currency)
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("booking %s: %w", e.Key, err)
	}
	for i, side := range []struct {
		acc string
		d   bool
	}{{e.Debit, true}, {e.Credit, false}} {
		s := "C"
		if side.d {
			s = "D"
		}
		if _, err := tx.Exec(ctx, m.q.Get("JournalLineInsert"), id, i+1, side.acc, s, e.Amount, e.Currency); err != nil {
			return false, fmt.Errorf("booking %s: %w", e.Key, err)
		}
		if err := m.moveAccount(ctx, tx, side.acc, e.Currency, side.d, e.Amount, now); err != nil {
			return false, fmt.Errorf("booking %s: %w", e.Key, err)
		}
	}
	m.met.ledger.WithLabelValues(e.Action).Inc()
	return true, nil
}

func reversedKey(k string) string {
	const suffix = ":reversal"
	if len(k) > len(suffix) && k[len(k)-len(suffix):] == suffix {
		return k[:len(k)-len(suffix)]
	}
	return k
}

func (m *Module[TTx]) moveAccount(ctx context.Context, tx keelsql.Tx[TTx], acc, currency string, debit bool, amount int64, now time.Time) error {
	t, ok := accountTypes[acc]
	if !ok {
		return fmt.Errorf("ledger: no account %s", acc)
	}
	key := fmt.Sprintf("%p/%s/%s", m, acc, currency)
	if _, done := ensured.Load(key); !done {
		neg := 0
		if t.allowNegative {
			neg = 1
		}
		if _, err := tx.Exec(ctx, m.q.Get("AccountEnsure"), acc, currency, t.kind, neg, now); err != nil {
			return err
		}
		// Remembered only after the transaction that created it commits
		// would be exact; a rolled-back creation is created again by
		// AccountMove's miss below.
		ensured.Store(key, true)
	}
	delta := amount
	if debit != t.normalDebit() {
		delta = -amount
	}
	n, err := tx.Exec(ctx, m.q.Get("AccountMove"), acc, currency, delta, now)
	if err != nil {
		return err
	}
	if n == 0 {
		// Either overdrawn, or the account row was never committed
		// (its creating transaction rolled back): create and retry once.
		if _, err := tx.Exec(ctx, m.q.Get("AccountEnsure"), acc, currency, t.kind, 0, now); err != nil {
			return err
		}
		if n, err = tx.Exec(ctx, m.q.Get("AccountMove"), acc, currency, delta, now); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: %s %s by %d", errOverdrawn, acc, currency, delta)
		}
	}
	return nil
}

// Account is a ledger account's balance.
type Account struct {
	Code          string    `json:"code"`
	Currency      string    `json:"currency"`
	Kind          string    `json:"kind"`
	AllowNegative bool      `json:"allow_negative"`
	Balance       int64     `json:"balance_minor"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// Accounts lists the balances.
func (m *Module[TTx]) Accounts(ctx context.Context) ([]Account, error) {
	rows, err := m.db.Query(ctx, m.q.Get("AccountList"))
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Account, error) {
		var a Account
		var neg int
		err := r.Scan(&a.Code, &a.Currency, &a.Kind, &neg, &a.Balance, &a.UpdatedAt)
		a.AllowNegative = neg == 1
		return a, err
	})
}

// Journal lists a payment's entries (its refunds' included).
func (m *Module[TTx]) Journal(ctx context.Context, paymentNo string) ([]Entry, error) {
	rows, err := m.db.Query(ctx, m.q.Get("JournalOfPayment"), paymentNo)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Entry, error) {
		var e Entry
		err := r.Scan(&e.ID, &e.Key, &e.Subject, &e.Action, &e.PaymentNo, &e.RefundNo, &e.EventID, &e.Amount,
			&e.Currency, &e.Reverses, &e.PostedAt)
		return e, err
	})
}
