package paysim

import (
	"fmt"
	"time"

	"github.com/keelwork/keel/modules/payment/channel"
)

var chinaTime = time.FixedZone("CST", 8*3600)

type trade struct {
	kind          channel.Kind
	outTradeNo    string
	transactionID string
	amount        int64
	currency      string
	state         channel.State // not_paid, paid, closed
	created       time.Time
	paidAt        time.Time
	refunded      int64
	chargeID      string // Stripe
}

type refund struct {
	kind          channel.Kind
	outTradeNo    string
	outRefundNo   string
	refundID      string
	amount        int64
	state         channel.State // refunded, refunding, refund_failed
	created, at   time.Time
	transactionID string
}

// TradeView is the channel's record of a trade, for tests.
type TradeView struct {
	OutTradeNo, TransactionID  string
	AmountMinor, RefundedMinor int64
	Currency                   string
	State                      channel.State
	PaidAt                     time.Time
}

// Create makes a trade exist at the channel, unpaid (what the unified order
// call would do). Creating an existing trade changes nothing.
func (s *Sim) Create(kind channel.Kind, outTradeNo string, amountMinor int64, currency string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{kind, outTradeNo}
	if _, ok := s.trades[k]; ok {
		return
	}
	t := &trade{kind: kind, outTradeNo: outTradeNo, amount: amountMinor, currency: currency,
		state: channel.StateNotPaid, created: s.now()}
	if kind == channel.KindStripe {
		t.transactionID = "pi_" + randomString(24) // a PaymentIntent exists from the start
	}
	s.trades[k] = t
}

// Pay is the buyer paying: the trade becomes paid and its callback starts
// on the retry schedule until acknowledged. Paying a closed trade models a
// payment that completed at the channel while the close was in flight
// (the late success after close).
func (s *Sim) Pay(kind channel.Kind, outTradeNo string) error {
	if err := s.pay(kind, outTradeNo); err != nil {
		return err
	}
	s.notifyPayment(kind, outTradeNo)
	return nil
}

// PayWithoutCallback pays the trade but never notifies Keel (only a query
// or the bill can find it).
func (s *Sim) PayWithoutCallback(kind channel.Kind, outTradeNo string) error {
	return s.pay(kind, outTradeNo)
}

func (s *Sim) pay(kind channel.Kind, outTradeNo string) error {
	if kind != channel.KindWeChat && kind != channel.KindAlipay && kind != channel.KindStripe {
		return fmt.Errorf("%w %q", errUnknownKind, kind)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.trades[key{kind, outTradeNo}]
	if !ok {
		return fmt.Errorf("paysim: %s has no trade %q", kind, outTradeNo)
	}
	if t.state == channel.StatePaid {
		return fmt.Errorf("paysim: %s trade %q is already paid", kind, outTradeNo)
	}
	t.state, t.paidAt = channel.StatePaid, s.now()
	switch kind {
	case channel.KindWeChat:
		t.transactionID = s.id("42000")
	case channel.KindAlipay:
		t.transactionID = s.id("") + "22001"
	case channel.KindStripe:
		t.chargeID = "ch_" + randomString(24)
	}
	return nil
}

// Trade returns the channel's record of a trade.
func (s *Sim) Trade(kind channel.Kind, outTradeNo string) (TradeView, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.trades[key{kind, outTradeNo}]
	if !ok {
		return TradeView{}, false
	}
	return TradeView{OutTradeNo: t.outTradeNo, TransactionID: t.transactionID, AmountMinor: t.amount,
		RefundedMinor: t.refunded, Currency: t.currency, State: t.state, PaidAt: t.paidAt}, true
}

// refusal is a business or system answer instead of a result.
type refusal struct {
	status int    // HTTP status (WeChat)
	code   string // WeChat code
	sub    string // Alipay sub_code; "" with code 20000 for a system error
	msg    string
}

var (
	refNoTrade   = &refusal{404, "ORDER_NOT_EXIST", "ACQ.TRADE_NOT_EXIST", "订单不存在"}
	refNoRefund  = &refusal{404, "RESOURCE_NOT_EXISTS", "", "退款单不存在"}
	refSystem    = &refusal{500, "SYSTEM_ERROR", "ACQ.SYSTEM_ERROR", "系统繁忙，请稍后再试"}
	refNotPaid   = &refusal{400, "INVALID_REQUEST", "ACQ.TRADE_STATUS_ERROR", "订单状态不允许退款"}
	refTooMuch   = &refusal{400, "INVALID_REQUEST", "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL", "退款金额超过订单可退金额"}
	refBalance   = &refusal{403, "NOT_ENOUGH", "ACQ.SELLER_BALANCE_NOT_ENOUGH", "商户可用余额不足"}
	refPaid      = &refusal{400, "ORDERPAID", "ACQ.TRADE_STATUS_ERROR", "订单已支付"}
	refMalformed = &refusal{400, "PARAM_ERROR", "isv.invalid-parameter", "参数错误"}
)

// refundOutcome tells the server how to end the refund request.
type refundOutcome int

const (
	answer refundOutcome = iota
	hang
	disconnect
)

// doRefund applies a refund request under the channel's rules: the refund
// number is the idempotency key (a repeat returns the same refund).
func (s *Sim) doRefund(kind channel.Kind, outTradeNo, outRefundNo string, amount int64) (*refund, *refusal, refundOutcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c.refundCalls[outRefundNo]++
	s.refundTrade[outRefundNo] = outTradeNo
	b := s.behaviour[outRefundNo]
	first := !s.used[outRefundNo]
	if r, ok := s.refunds[key{kind, outRefundNo}]; ok {
		if b == Unavailable {
			return nil, refSystem, answer
		}
		return r, nil, answer
	}
	switch {
	case b == Unavailable:
		return nil, refSystem, answer
	case b == Refused:
		return nil, refBalance, answer
	case b == FailNotExecuted && first:
		s.used[outRefundNo] = true
		return nil, refSystem, answer
	}
	t, ok := s.trades[key{kind, outTradeNo}]
	if !ok {
		return nil, refNoTrade, answer
	}
	if t.state != channel.StatePaid {
		return nil, refNotPaid, answer
	}
	if amount <= 0 || t.refunded+amount > t.amount {
		return nil, refTooMuch, answer
	}
	now := s.now()
	r := &refund{kind: kind, outTradeNo: outTradeNo, outRefundNo: outRefundNo, amount: amount,
		state: channel.StateRefunded, created: now, at: now, transactionID: t.transactionID}
	switch kind {
	case channel.KindWeChat:
		r.refundID = s.id("50300")
	case channel.KindStripe:
		r.refundID = "re_" + randomString(24)
	}
	switch {
	case b == Abnormal:
		r.state, r.at = channel.StateRefundFail, time.Time{}
	case b == Processing && kind != channel.KindAlipay:
		r.state, r.at = channel.StateRefunding, time.Time{}
		t.refunded += amount // reserved: it can only settle
	default:
		t.refunded += amount
	}
	s.refunds[key{kind, outRefundNo}] = r
	out := answer
	if first {
		switch b {
		case ExecuteThenTimeout:
			out = hang
		case ExecuteThenDisconnect:
			out = disconnect
		}
		s.used[outRefundNo] = true
	}
	if r.state == channel.StateRefunded && s.opts.RefundCallbacks {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.notifyRefund(kind, outRefundNo)
		}()
	}
	return r, nil, out
}

// findRefund answers a refund query.
func (s *Sim) findRefund(kind channel.Kind, outRefundNo string) (refund, *refusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c.refundQueries[outRefundNo]++
	if s.behaviour[outRefundNo] == Unavailable {
		return refund{}, refSystem
	}
	r, ok := s.refunds[key{kind, outRefundNo}]
	if !ok {
		return refund{}, refNoRefund
	}
	return *r, nil
}

// findTrade answers a payment query.
func (s *Sim) findTrade(kind channel.Kind, outTradeNo string) (trade, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c.queries[outTradeNo]++
	t, ok := s.trades[key{kind, outTradeNo}]
	if !ok {
		return trade{}, false
	}
	return *t, true
}

// closeTrade closes an unpaid trade.
func (s *Sim) closeTrade(kind channel.Kind, outTradeNo string) *refusal {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c.closes[outTradeNo]++
	t, ok := s.trades[key{kind, outTradeNo}]
	switch {
	case !ok:
		return refNoTrade
	case t.state == channel.StatePaid:
		return refPaid
	}
	t.state = channel.StateClosed
	return nil
}

func (s *Sim) reject() {
	s.mu.Lock()
	s.c.rejected++
	s.mu.Unlock()
}

// SettleRefund completes a refund left processing by the Processing
// behaviour: it becomes SUCCESS (and is notified with RefundCallbacks).
func (s *Sim) SettleRefund(kind channel.Kind, outRefundNo string) error {
	s.mu.Lock()
	r, ok := s.refunds[key{kind, outRefundNo}]
	if !ok || r.state != channel.StateRefunding {
		s.mu.Unlock()
		return fmt.Errorf("paysim: %s has no processing refund %q", kind, outRefundNo)
	}
	r.state, r.at = channel.StateRefunded, s.now()
	notify := s.opts.RefundCallbacks
	if notify {
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if notify {
		go func() {
			defer s.wg.Done()
			s.notifyRefund(kind, outRefundNo)
		}()
	}
	return nil
}
