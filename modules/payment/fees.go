package payment

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/modules/payment/channel"
)

// Topics of the channel's fees, emitted when a bill is fetched.
const (
	TopicFee       = "payment.fee"        // the channel kept a fee out of a payment
	TopicFeeReturn = "payment.fee_return" // the channel gave a fee back with a refund
)

// FeeEvent is the payload of the fee events: the fee as the channel's bill
// states it, positive.
type FeeEvent struct {
	PaymentNo     string `json:"payment_no"`
	RefundNo      string `json:"refund_no,omitempty"`
	Channel       string `json:"channel"`
	Day           string `json:"day"`
	TransactionID string `json:"transaction_id"`
	FeeMinor      int64  `json:"fee_minor"`
	Currency      string `json:"currency"`
}

// feeEvents are the fee events of a fetched bill, emitted in the bill's
// transaction: the ledger books each once (keyed by the payment or the
// refund), in order after the payment's capture, since the events share
// the payment's key. Only lines of our own payments the channel agrees
// were paid, and of our own refunds, carry a fee to the ledger; a line we
// do not know is reconciliation's, not the ledger's. Payments' fees come
// before refunds' returns, so the fee account is never taken below zero by
// a return booked before the fee it returns. A payment or refund on the
// bill twice (a duplicate line, a reconciliation discrepancy) books its
// fee once.
func (m *Module[TTx]) feeEvents(ctx context.Context, tx keelsql.Tx[TTx], kind channel.Kind, day string, lines []channel.BillLine) ([]keelevents.Event, error) {
	var pays, refunds []keelevents.Event
	seen := map[string]bool{}
	for _, l := range lines {
		var fe FeeEvent
		var topic, id string
		switch {
		case l.Event == channel.EventPayment && l.FeeMinor > 0 && l.State == channel.StatePaid:
			p, err := m.paymentIn(ctx, tx, l.OutTradeNo)
			if isProblem(err, ErrNoPayment) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if (p.State != PayPaid && p.State != PayManual) || p.TransactionID != l.TransactionID || p.Currency != l.Currency {
				continue
			}
			fe = FeeEvent{PaymentNo: p.PaymentNo, Channel: string(kind), Day: day, TransactionID: l.TransactionID,
				FeeMinor: l.FeeMinor, Currency: l.Currency}
			topic, id = TopicFee, "fee:"+p.PaymentNo
		case l.Event == channel.EventRefund && l.FeeMinor < 0 && l.State == channel.StateRefunded:
			r, err := m.refundIn(ctx, tx, l.OutRefundNo)
			if isProblem(err, ErrNoRefund) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if r.PaymentNo != l.OutTradeNo || r.Currency != l.Currency {
				continue
			}
			fe = FeeEvent{PaymentNo: r.PaymentNo, RefundNo: r.RefundNo, Channel: string(kind), Day: day,
				TransactionID: l.TransactionID, FeeMinor: -l.FeeMinor, Currency: l.Currency}
			topic, id = TopicFeeReturn, "fee:"+r.RefundNo+":return"
		default:
			continue
		}
		if seen[id] || !validAmount(fe.FeeMinor) {
			continue
		}
		seen[id] = true
		body, err := json.Marshal(fe)
		if err != nil {
			return nil, err
		}
		ev := keelevents.Event{Topic: topic, ID: id, Key: fe.PaymentNo, Payload: body}
		if topic == TopicFee {
			pays = append(pays, ev)
		} else {
			refunds = append(refunds, ev)
		}
	}
	return append(pays, refunds...), nil
}

// feeEntry maps a fee event to its entry: a fee is an expense paid out of
// what the channel holds for us; a returned fee reverses that.
func feeEntry(d *keelevents.Delivery) (*Entry, error) {
	var fe FeeEvent
	if err := json.Unmarshal(d.Payload, &fe); err != nil {
		return nil, fmt.Errorf("decoding %s/%s: %w", d.Topic, d.ID, err)
	}
	if d.Topic == TopicFeeReturn {
		return &Entry{Key: "refund:" + fe.RefundNo + ":fee_return", Subject: "refund:" + fe.RefundNo, Action: "fee_return",
			PaymentNo: fe.PaymentNo, RefundNo: fe.RefundNo, EventID: d.ID, Amount: fe.FeeMinor, Currency: fe.Currency,
			Debit: AccClearing, Credit: AccFees}, nil
	}
	return &Entry{Key: "payment:" + fe.PaymentNo + ":fee", Subject: "payment:" + fe.PaymentNo, Action: "fee",
		PaymentNo: fe.PaymentNo, EventID: d.ID, Amount: fe.FeeMinor, Currency: fe.Currency,
		Debit: AccFees, Credit: AccClearing}, nil
}
