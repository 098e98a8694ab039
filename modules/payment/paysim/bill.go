package paysim

import (
	"fmt"
	"sort"
	"time"

	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/modules/payment/channel/alipay"
	"github.com/keelwork/keel/modules/payment/channel/wechatpay"
)

// Injection alters the channel's daily bill for one trade (or one refund of
// it), to give reconciliation every class of discrepancy to find. Missing
// ours is not an alteration: see InjectMissingOurs.
type Injection struct {
	OutTradeNo  string
	OutRefundNo string        // selects the refund row instead of the payment row
	Drop        bool          // the row is missing on the channel
	Duplicate   bool          // the row appears twice
	DeltaMinor  int64         // the row's amount differs by this much
	State       channel.State // the row states this instead (WeChat only: Alipay's bill has no status column)
}

// InjectBill adds an alteration to every later bill of the channel.
func (s *Sim) InjectBill(kind channel.Kind, inj Injection) error {
	if inj.OutTradeNo == "" {
		return fmt.Errorf("paysim: injection without out_trade_no")
	}
	if inj.State != "" && kind != channel.KindWeChat {
		return fmt.Errorf("paysim: the %s bill has no status column; a status mismatch can only be injected into the wechat bill", kind)
	}
	s.mu.Lock()
	s.injections[kind] = append(s.injections[kind], inj)
	s.mu.Unlock()
	return nil
}

// BillDrop leaves the trade out of the bill (missing on the channel).
func (s *Sim) BillDrop(kind channel.Kind, outTradeNo string) error {
	return s.InjectBill(kind, Injection{OutTradeNo: outTradeNo, Drop: true})
}

// BillDuplicate lists the trade twice (duplicate).
func (s *Sim) BillDuplicate(kind channel.Kind, outTradeNo string) error {
	return s.InjectBill(kind, Injection{OutTradeNo: outTradeNo, Duplicate: true})
}

// BillAmount shifts the trade's billed amount by delta (amount mismatch).
func (s *Sim) BillAmount(kind channel.Kind, outTradeNo string, deltaMinor int64) error {
	return s.InjectBill(kind, Injection{OutTradeNo: outTradeNo, DeltaMinor: deltaMinor})
}

// BillState bills the trade in another state (status mismatch; WeChat).
func (s *Sim) BillState(kind channel.Kind, outTradeNo string, st channel.State) error {
	return s.InjectBill(kind, Injection{OutTradeNo: outTradeNo, State: st})
}

// BillOffsettingPair bills a one minor unit too much and b one too little:
// the day's totals still agree, only row-by-row matching finds them.
func (s *Sim) BillOffsettingPair(kind channel.Kind, a, b string) error {
	if err := s.BillAmount(kind, a, +1); err != nil {
		return err
	}
	return s.BillAmount(kind, b, -1)
}

// InjectMissingOurs makes a paid trade exist at the channel that Keel never
// heard of (no callback): it is in the bill and a query finds it.
func (s *Sim) InjectMissingOurs(kind channel.Kind, outTradeNo string, amountMinor int64, currency string) error {
	s.Create(kind, outTradeNo, amountMinor, currency)
	return s.PayWithoutCallback(kind, outTradeNo)
}

// billEvent is one payment or refund on the bill's day.
type billEvent struct {
	t  *trade
	r  *refund // nil for the payment row
	at time.Time
}

// events lists the day's (China time) payments and executed refunds, with
// the injections that apply to each, in time order.
func (s *Sim) events(kind channel.Kind, day time.Time) ([]billEvent, []Injection) {
	from := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, day.Location())
	to := from.Add(24 * time.Hour)
	in := func(t time.Time) bool { return !t.Before(from) && t.Before(to) }
	s.mu.Lock()
	defer s.mu.Unlock()
	var ev []billEvent
	for k, t := range s.trades {
		if k.kind == kind && !t.paidAt.IsZero() && in(t.paidAt) {
			c := *t
			ev = append(ev, billEvent{t: &c, at: t.paidAt})
		}
	}
	for k, r := range s.refunds {
		if k.kind == kind && r.state == channel.StateRefunded && in(r.at) {
			c, tc := *r, *s.trades[key{kind, r.outTradeNo}]
			ev = append(ev, billEvent{t: &tc, r: &c, at: r.at})
		}
	}
	sort.Slice(ev, func(i, j int) bool {
		if !ev[i].at.Equal(ev[j].at) {
			return ev[i].at.Before(ev[j].at)
		}
		return ev[i].t.outTradeNo+refundNo(ev[i]) < ev[j].t.outTradeNo+refundNo(ev[j])
	})
	return ev, append([]Injection(nil), s.injections[kind]...)
}

func refundNo(e billEvent) string {
	if e.r == nil {
		return ""
	}
	return e.r.outRefundNo
}

// applies returns the injections for one event, merged.
func applies(e billEvent, injs []Injection) (inj Injection) {
	for _, i := range injs {
		if i.OutTradeNo == e.t.outTradeNo && i.OutRefundNo == refundNo(e) {
			inj.Drop = inj.Drop || i.Drop
			inj.Duplicate = inj.Duplicate || i.Duplicate
			inj.DeltaMinor += i.DeltaMinor
			if i.State != "" {
				inj.State = i.State
			}
		}
	}
	return inj
}

// fee is the simulated 0.6% service fee, rounded half up.
func fee(amount int64) int64 { return (amount*6 + 500) / 1000 }

func (s *Sim) wxBillRows(day time.Time) []wechatpay.BillRow {
	m := s.merchant(channel.KindWeChat)
	ev, injs := s.events(channel.KindWeChat, day)
	var rows []wechatpay.BillRow
	for _, e := range ev {
		inj := applies(e, injs)
		if inj.Drop {
			continue
		}
		r := wechatpay.BillRow{TradeTime: e.at.In(chinaTime).Format("2006-01-02 15:04:05"), AppID: m.AppID,
			MchID: m.MerchantID, TransactionID: e.t.transactionID, OutTradeNo: e.t.outTradeNo,
			OpenID: "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o", TradeType: "JSAPI", BankType: "CMB_DEBIT",
			Currency: e.t.currency, Body: "Keel 订单", Rate: "0.60%"}
		if e.r == nil {
			amt := e.t.amount + inj.DeltaMinor
			r.TradeState, r.SettlementTotal, r.OrderAmount, r.Fee = "SUCCESS", amt, amt, fee(amt)
			switch inj.State {
			case channel.StateClosed:
				r.TradeState = "REVOKED"
			case channel.StateNotPaid:
				r.TradeState = "NOTPAY"
			}
		} else {
			amt := e.r.amount + inj.DeltaMinor
			r.TradeState, r.RefundID, r.OutRefundNo, r.RefundAmount, r.RefundApplied = "REFUND", e.r.refundID, e.r.outRefundNo, amt, amt
			r.RefundType, r.RefundStatus, r.Fee = "ORIGINAL", "SUCCESS", -fee(amt)
			switch inj.State {
			case channel.StateRefunding:
				r.RefundStatus = "PROCESSING"
			case channel.StateRefundFail:
				r.RefundStatus = "ABNORMAL"
			}
		}
		rows = append(rows, r)
		if inj.Duplicate {
			rows = append(rows, r)
		}
	}
	return rows
}

func (s *Sim) apBillRows(day time.Time) []alipay.BillRow {
	ev, injs := s.events(channel.KindAlipay, day)
	var rows []alipay.BillRow
	for _, e := range ev {
		inj := applies(e, injs)
		if inj.Drop {
			continue
		}
		r := alipay.BillRow{TradeNo: e.t.transactionID, OutTradeNo: e.t.outTradeNo, Subject: "Keel 订单",
			Created: alipay.FormatTime(e.t.created), Finished: alipay.FormatTime(e.at), Buyer: "159****5620"}
		if e.r == nil {
			amt := e.t.amount + inj.DeltaMinor
			r.Type, r.OrderAmount, r.Received, r.ServiceFee = alipay.BillTrade, amt, amt, -fee(amt)
		} else {
			amt := e.r.amount + inj.DeltaMinor
			r.Type, r.OrderAmount, r.Received, r.ServiceFee = alipay.BillRefund, -amt, -amt, fee(amt)
			r.OutRequestNo = e.r.outRefundNo
		}
		rows = append(rows, r)
		if inj.Duplicate {
			rows = append(rows, r)
		}
	}
	return rows
}
