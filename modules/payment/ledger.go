package payment

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// registerConsumers subscribes the ledger, ordered by payment number so
// that a refund's entries follow its payment's capture, and the orders
// consumer, unordered: it reads only the success events, one per payment,
// and marks an order paid by a conditional update that any order of
// arrival leaves the same. An ordered subscription costs the bus one
// consumer per partition (on JetStream each writes its state file up to
// ten times a second: 40% of the CPU of a ledger backlog's drain with both
// ordered, docs/benchmarks.md); an unordered one costs one.
func (m *Module[TTx]) registerConsumers() error {
	if err := m.ev.Consume(keelevents.Consumer[TTx]{Name: ConsumerLedger, Topics: []string{"payment.>"}, Ordered: true,
		HandleBatch: m.handleLedgerBatch, Batch: ledgerBatch, Window: ledgerWindow}); err != nil {
		return err
	}
	// Marking an order paid is one conditional update: the inbox's group
	// commit shares a transaction (and its inbox statement) among the
	// events that arrive together.
	return m.ev.Consume(keelevents.Consumer[TTx]{Name: ConsumerOrders, Topics: []string{TopicPaid},
		HandleBatch: m.handleOrders, Batch: ledgerBatch})
}

// handleOrders marks the business orders of success events paid:
// conditional, so the same success twice (past the inbox) changes
// nothing. On PostgreSQL a batch is one statement (a statement per event
// was the largest share of a ledger backlog's drain once the ledger took
// windows); of two events of one order in a batch the first counts, as
// one by one.
func (m *Module[TTx]) handleOrders(ctx context.Context, tx keelsql.Tx[TTx], ds []*keelevents.Delivery) error {
	now := m.Now()
	var ids, pays, events []string
	seen := make(map[string]bool, len(ds))
	for _, d := range ds {
		var ev PaymentEvent
		if err := json.Unmarshal(d.Payload, &ev); err != nil {
			return fmt.Errorf("decoding %s/%s: %w", d.Topic, d.ID, err)
		}
		if m.db.Dialect() != "postgres" {
			if _, err := tx.Exec(ctx, m.q.Get("OrderMarkPaid"), ev.OrderID, ev.PaymentNo, d.ID, now); err != nil {
				return fmt.Errorf("marking order %s paid: %w", ev.OrderID, err)
			}
			continue
		}
		if seen[ev.OrderID] {
			continue
		}
		seen[ev.OrderID] = true
		ids, pays, events = append(ids, ev.OrderID), append(pays, ev.PaymentNo), append(events, d.ID)
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, m.q.Get("OrderMarkPaidMany"), keelsql.ArrayOf(ids), keelsql.ArrayOf(pays),
		keelsql.ArrayOf(events), now); err != nil {
		return fmt.Errorf("marking %d orders paid: %w", len(ids), err)
	}
	return nil
}

// ledgerBatch bounds the events one ledger transaction books.
const ledgerBatch = 200

// ledgerWindow is how many events of one partition the ledger takes at a
// time where the bus can keep a partition with one instance (JetStream 2.11
// and later): one at a time, a partition's drain is bounded by a round
// trip (delivery, commit, acknowledgement) per event, whatever the batch.
const ledgerWindow = 64

// handleLedgerBatch books the entries of several events in one
// transaction (the inbox's batch): on PostgreSQL the journal rows and
// lines of every entry that reverses nothing in one statement, the others
// one by one, then each balance once by the batch's net change, so the
// balance rows every entry touches are locked once per batch, not twice
// per event. If anything fails, the inbox retries each event alone, where
// an overdraft or a reused key is that event's own.
func (m *Module[TTx]) handleLedgerBatch(ctx context.Context, tx keelsql.Tx[TTx], ds []*keelevents.Delivery) error {
	mv := moves{}
	var plain []*Entry
	for _, d := range ds {
		e, err := ledgerEntry(d)
		if err != nil {
			return err
		}
		if e == nil {
			continue
		}
		if e.Reverses == 0 && m.db.Dialect() == "postgres" {
			plain = append(plain, e)
			continue
		}
		// A reversal looks up the entry it reverses, which may be among
		// those gathered before it: they are booked first, so the batch
		// books in delivery order. SQLite books entry by entry.
		if err := m.bookMany(ctx, tx, plain, mv); err != nil {
			return err
		}
		plain = plain[:0]
		if _, err := m.book(ctx, tx, e, mv); err != nil {
			return err
		}
	}
	if err := m.bookMany(ctx, tx, plain, mv); err != nil {
		return err
	}
	return m.applyMoves(ctx, tx, mv)
}

// bookMany books entries that reverse nothing in one statement (their
// journal rows and lines, PostgreSQL) and adds the balance changes of
// those booked to mv. An entry whose key was booked already books nothing;
// booked with another amount, it is an error, as in book. Two entries of
// one key in a batch (the same event twice) book once.
func (m *Module[TTx]) bookMany(ctx context.Context, tx keelsql.Tx[TTx], es []*Entry, mv moves) error {
	if len(es) == 0 {
		return nil
	}
	byKey := make(map[string]*Entry, len(es))
	var uniq []*Entry
	for _, e := range es {
		if o, dup := byKey[e.Key]; dup {
			if o.Amount != e.Amount || o.Currency != e.Currency {
				return fmt.Errorf("ledger: entry %s twice in a batch with %d %s and %d %s", e.Key, o.Amount, o.Currency, e.Amount, e.Currency)
			}
			continue
		}
		byKey[e.Key] = e
		uniq = append(uniq, e)
	}
	k := len(uniq)
	keys, subjects, actions, pays, refunds := make([]string, k), make([]string, k), make([]string, k), make([]string, k), make([]string, k)
	events, currencies, debits, credits := make([]string, k), make([]string, k), make([]string, k), make([]string, k)
	amounts := make([]int64, k)
	for i, e := range uniq {
		keys[i], subjects[i], actions[i], pays[i], refunds[i] = e.Key, e.Subject, e.Action, e.PaymentNo, e.RefundNo
		events[i], currencies[i], debits[i], credits[i], amounts[i] = e.EventID, e.Currency, e.Debit, e.Credit, e.Amount
	}
	rows, err := tx.Query(ctx, m.q.Get("JournalInsertMany"), keelsql.ArrayOf(keys), keelsql.ArrayOf(subjects),
		keelsql.ArrayOf(actions), keelsql.ArrayOf(pays), keelsql.ArrayOf(refunds), keelsql.ArrayOf(events),
		keelsql.ArrayOf(amounts), keelsql.ArrayOf(currencies), keelsql.ArrayOf(debits), keelsql.ArrayOf(credits), m.Now())
	booked, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (string, error) {
		var key string
		return key, r.Scan(&key)
	})
	if err != nil {
		return fmt.Errorf("booking %d entries: %w", k, err)
	}
	done := make(map[string]bool, len(booked))
	for _, key := range booked {
		e := byKey[key]
		done[key] = true
		if err := mv.add(e.Debit, e.Currency, true, e.Amount); err != nil {
			return err
		}
		if err := mv.add(e.Credit, e.Currency, false, e.Amount); err != nil {
			return err
		}
		m.met.ledger.WithLabelValues(e.Action).Inc()
	}
	for _, e := range uniq {
		if done[e.Key] {
			continue
		}
		var id, amt int64
		var cur string
		if err := tx.QueryRow(ctx, m.q.Get("JournalByKey"), e.Key).Scan(&id, &amt, &cur); err != nil {
			return fmt.Errorf("reading entry %s: %w", e.Key, err)
		}
		if amt != e.Amount || cur != e.Currency {
			return fmt.Errorf("ledger: entry %s is booked with %d %s, the event says %d %s", e.Key, amt, cur, e.Amount, e.Currency)
		}
	}
	return nil
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
	case TopicFee, TopicFeeReturn:
		return feeEntry(d)
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
	mv := moves{}
	booked, err := m.book(ctx, tx, e, mv)
	if err != nil || !booked {
		return booked, err
	}
	if err := m.applyMoves(ctx, tx, mv); err != nil {
		return false, fmt.Errorf("booking %s: %w", e.Key, err)
	}
	return true, nil
}

// moves are the balance changes of the entries booked in one transaction,
// per (account, currency), in the account's normal direction.
type moves map[[2]string]int64

func (mv moves) add(acc, currency string, debit bool, amount int64) error {
	t, ok := accountTypes[acc]
	if !ok {
		return fmt.Errorf("ledger: no account %s", acc)
	}
	if debit != t.normalDebit() {
		amount = -amount
	}
	mv[[2]string{acc, currency}] += amount
	return nil
}

// book writes e's journal row and its two lines in tx and adds its
// balance changes to mv (applied by applyMoves).
func (m *Module[TTx]) book(ctx context.Context, tx keelsql.Tx[TTx], e *Entry, mv moves) (bool, error) {
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
	// Both lines in one statement: the entry is balanced by construction.
	if _, err := tx.Exec(ctx, m.q.Get("JournalLinesInsert"), id, e.Debit, e.Credit, e.Amount, e.Currency); err != nil {
		return false, fmt.Errorf("booking %s: %w", e.Key, err)
	}
	if err := mv.add(e.Debit, e.Currency, true, e.Amount); err != nil {
		return false, err
	}
	if err := mv.add(e.Credit, e.Currency, false, e.Amount); err != nil {
		return false, err
	}
	m.met.ledger.WithLabelValues(e.Action).Inc()
	return true, nil
}

// applyMoves moves each balance once by its net change, in a fixed order
// of accounts so concurrent transactions take the rows' locks in the same
// order. An account that would go below zero where its type forbids fails
// the transaction.
func (m *Module[TTx]) applyMoves(ctx context.Context, tx keelsql.Tx[TTx], mv moves) error {
	keys := make([][2]string, 0, len(mv))
	for k, d := range mv {
		if d != 0 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	now := m.Now()
	for _, k := range keys {
		if err := m.moveAccount(ctx, tx, k[0], k[1], mv[k], now); err != nil {
			return err
		}
	}
	return nil
}

func reversedKey(k string) string {
	const suffix = ":reversal"
	if len(k) > len(suffix) && k[len(k)-len(suffix):] == suffix {
		return k[:len(k)-len(suffix)]
	}
	return k
}

// moveAccount moves a balance by delta, in the account's normal direction.
func (m *Module[TTx]) moveAccount(ctx context.Context, tx keelsql.Tx[TTx], acc, currency string, delta int64, now time.Time) error {
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
