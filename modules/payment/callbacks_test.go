package payment

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/modules/payment/channel/wechatpay"
	"github.com/keelwork/keel/modules/payment/paysim"
)

// wxForge builds a TRANSACTION.SUCCESS notification the way the channel
// does, with knobs to break it.
type wxForge struct {
	tr           wechatpay.Transaction
	ad           string
	mutateCipher bool
	mutateAD     bool
	serial       string
	at           time.Time
	otherKey     bool
	after        func(body []byte) []byte // alters the body after signing
	sig          func(h http.Header)      // alters the headers after signing
	raw          func(body []byte) []byte // replaces the body before signing
}

func (e *tenv[TTx]) wxSuccess(no string, amount int64, currency string) wechatpay.Transaction {
	cfg := e.sim.Config(channel.KindWeChat)
	return wechatpay.Transaction{AppID: cfg.AppID, MchID: cfg.MerchantID, OutTradeNo: no, TransactionID: "4200" + no,
		TradeType: "JSAPI", TradeState: "SUCCESS", TradeStateDesc: "支付成功", SuccessTime: time.Now().Format(time.RFC3339),
		Amount: &wechatpay.Money{Total: amount, PayerTotal: amount, Currency: currency, PayerCurrency: currency}}
}

func (e *tenv[TTx]) wxForge(t *testing.T, f wxForge) (http.Header, []byte) {
	t.Helper()
	plain, _ := json.Marshal(f.tr)
	if f.ad == "" {
		f.ad = "transaction"
	}
	res, err := e.sim.WeChatResource(plain, f.ad)
	if err != nil {
		t.Fatal(err)
	}
	if f.mutateCipher {
		c := []byte(res.Ciphertext)
		c[5] ^= 0x01
		if c[5] == '+' || c[5] == '/' || c[5] == '=' {
			c[5] = 'A'
		}
		res.Ciphertext = string(c)
	}
	if f.mutateAD {
		res.AssociatedData = "transaction-x"
	}
	body, _ := json.Marshal(wechatpay.Notification{ID: "EV-" + f.tr.OutTradeNo, CreateTime: time.Now().Format(time.RFC3339),
		EventType: "TRANSACTION.SUCCESS", ResourceType: "encrypt-resource", Summary: "支付成功", Resource: res})
	if f.raw != nil {
		body = f.raw(body)
	}
	var key = e.sim.PlatformKey(channel.KindWeChat)
	if f.otherKey {
		k, err := paysim.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		key = k
	}
	h := e.sim.SignWeChat(body, f.serial, f.at, key)
	if f.after != nil {
		body = f.after(body)
	}
	if f.sig != nil {
		f.sig(h)
	}
	return h, body
}

// TestPaymentCallbackVerify: valid WeChat and Alipay callbacks (one after a
// platform key rotation, found by one refresh of the key set) move their
// payments; every invalid one — tampered body, signature, ciphertext or
// associated data, an unknown serial, a timestamp 6 minutes old, another
// signing key, an unknown merchant, negative, overflowing or zero amounts,
// a currency that is no ISO code, oversized and non-UTF-8 bodies, a number
// we never issued — gets the channel's failure reply and changes nothing
// but the security audit.
func TestPaymentCallbackVerify(t *testing.T) { each(t, testCallbackVerify, testCallbackVerify) }

func testCallbackVerify[TTx any](t *testing.T, e *tenv[TTx]) {
	e.start(t, startOpts{noSweep: true})
	ctx := context.Background()
	// Valid, through the channel itself.
	e.pay(t, channel.KindWeChat, "WXOK000001", 1000, "CNY")
	e.pay(t, channel.KindAlipay, "APOK000001", 2000, "CNY")
	if err := e.sim.Pay(channel.KindWeChat, "WXOK000001"); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.Pay(channel.KindAlipay, "APOK000001"); err != nil {
		t.Fatal(err)
	}
	moduletest.WaitFor(t, 20*time.Second, "both valid callbacks acknowledged", func() bool {
		return e.sim.Acks("WXOK000001") == 1 && e.sim.Acks("APOK000001") == 1
	})
	for _, no := range []string{"WXOK000001", "APOK000001"} {
		if s := e.state(t, no); s != PayPaid {
			t.Fatalf("%s is %s", no, s)
		}
	}
	// A rotated platform key: the new serial is unknown, one refresh finds it.
	fetches := e.sim.CertFetches()
	if _, err := e.sim.RotateKey(channel.KindWeChat); err != nil {
		t.Fatal(err)
	}
	e.pay(t, channel.KindWeChat, "WXOK000002", 1500, "CNY")
	if err := e.sim.Pay(channel.KindWeChat, "WXOK000002"); err != nil {
		t.Fatal(err)
	}
	moduletest.WaitFor(t, 20*time.Second, "the callback signed by the new key", func() bool { return e.sim.Acks("WXOK000002") == 1 })
	if got := e.sim.CertFetches() - fetches; got != 1 {
		t.Fatalf("the key set was fetched %d times after the rotation, want 1", got)
	}

	// Invalid: every case against one pending payment of each channel.
	const wx, ap = "WXBAD00001", "APBAD00001"
	e.pay(t, channel.KindWeChat, wx, 5000, "CNY")
	e.pay(t, channel.KindAlipay, ap, 5000, "CNY")
	good := e.wxSuccess(wx, 5000, "CNY")
	with := func(f func(*wechatpay.Transaction)) wechatpay.Transaction {
		tr := good
		m := *tr.Amount
		tr.Amount = &m
		f(&tr)
		return tr
	}
	type wcase struct {
		name string
		f    wxForge
	}
	wcases := []wcase{
		{"tampered body", wxForge{tr: good, after: func(b []byte) []byte { return bytes.Replace(b, []byte("支付成功"), []byte("支付成攻"), 1) }}},
		{"tampered signature", wxForge{tr: good, sig: func(h http.Header) {
			s := []byte(h.Get(wechatpay.HeaderSignature))
			s[10] ^= 0x01
			if s[10] == '+' || s[10] == '/' {
				s[10] = 'B'
			}
			h.Set(wechatpay.HeaderSignature, string(s))
		}}},
		{"tampered ciphertext", wxForge{tr: good, mutateCipher: true}},
		{"tampered associated data", wxForge{tr: good, mutateAD: true}},
		{"unknown serial", wxForge{tr: good, serial: "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"}},
		{"timestamp 6 minutes old", wxForge{tr: good, at: time.Now().Add(-6 * time.Minute)}},
		{"another key", wxForge{tr: good, otherKey: true}},
		{"unknown merchant", wxForge{tr: with(func(tr *wechatpay.Transaction) { tr.MchID = "1900000999" })}},
		{"negative amount", wxForge{tr: with(func(tr *wechatpay.Transaction) { tr.Amount.Total = -5000 })}},
		{"zero amount", wxForge{tr: with(func(tr *wechatpay.Transaction) { tr.Amount.Total = 0 })}},
		{"overflowing amount", wxForge{tr: with(func(tr *wechatpay.Transaction) { tr.Amount.Total = 1 << 62 })}},
		{"currency not ISO", wxForge{tr: with(func(tr *wechatpay.Transaction) { tr.Amount.Currency = "cny" })}},
		{"number we never issued", wxForge{tr: with(func(tr *wechatpay.Transaction) { tr.OutTradeNo = "NOTOURS0001" })}},
		{"oversized body", wxForge{tr: good, raw: func(b []byte) []byte {
			return append(b[:len(b)-1], []byte(`,"pad":"`+strings.Repeat("x", 70<<10)+`"}`)...)
		}}},
		{"not UTF-8", wxForge{tr: good, raw: func(b []byte) []byte { return bytes.Replace(b, []byte("支付成功"), []byte{0xff, 0xfe}, 1) }}},
	}
	check := func(name string, status int, reply string, before int64) {
		t.Helper()
		if status < 400 {
			t.Errorf("%s: status %d (%s), want a failure reply", name, status, reply)
		}
		for _, no := range []string{wx, ap} {
			if s := e.state(t, no); s != PayPending {
				t.Fatalf("%s: %s moved to %s", name, no, s)
			}
			if n := e.Count(t, "SELECT COUNT(*) FROM pay_callback WHERE payment_no = $1", no); n != 0 {
				t.Fatalf("%s: %d callback evidence rows for %s, want none", name, n, no)
			}
			if n := e.Count(t, "SELECT COUNT(*) FROM keel_events_outbox WHERE event_key = $1", no); n != 0 {
				t.Fatalf("%s: an event for %s", name, no)
			}
		}
		if after := e.Count(t, "SELECT COUNT(*) FROM pay_security_audit"); after != before+1 {
			t.Fatalf("%s: security audit %d → %d, want one more", name, before, after)
		}
	}
	for _, c := range wcases {
		before := e.Count(t, "SELECT COUNT(*) FROM pay_security_audit")
		h, body := e.wxForge(t, c.f)
		status, reply := e.post(t, channel.KindWeChat, h, body)
		if !strings.Contains(reply, "FAIL") && status != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: reply %q is not WeChat's failure", c.name, reply)
		}
		check("wechat "+c.name, status, reply, before)
	}
	// Alipay: the gateway's own notification, altered.
	_, base, err := e.sim.Notification(channel.KindAlipay, "APOK000001")
	if err != nil {
		t.Fatal(err)
	}
	params, _ := url.ParseQuery(string(base))
	params.Set("out_trade_no", ap)
	params.Set("total_amount", "50.00")
	params.Set("trade_no", "2026120122001"+ap)
	otherKey, _ := paysim.NewKey()
	signed := func(mut func(url.Values)) []byte {
		p := url.Values{}
		for k, v := range params {
			p[k] = append([]string(nil), v...)
		}
		mut(p)
		return e.sim.SignAlipay(p, nil)
	}
	acases := []struct {
		name string
		body []byte
	}{
		{"tampered amount after signing", func() []byte {
			b := signed(func(url.Values) {})
			return bytes.Replace(b, []byte("total_amount=50.00"), []byte("total_amount=0.01"), 1)
		}()},
		{"another key", func() []byte { return e.sim.SignAlipay(params, otherKey) }()},
		{"unknown seller", signed(func(p url.Values) { p.Set("seller_id", "2088000000000001") })},
		{"unknown app", signed(func(p url.Values) { p.Set("app_id", "2021000000000001") })},
		{"negative amount", signed(func(p url.Values) { p.Set("total_amount", "-50.00") })},
		{"overflowing amount", signed(func(p url.Values) { p.Set("total_amount", "99999999999999999999.00") })},
		{"no signature", func() []byte {
			p, _ := url.ParseQuery(string(signed(func(url.Values) {})))
			p.Del("sign")
			return []byte(p.Encode())
		}()},
	}
	for _, c := range acases {
		before := e.Count(t, "SELECT COUNT(*) FROM pay_security_audit")
		status, reply := e.post(t, channel.KindAlipay, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, c.body)
		if reply != "fail" {
			t.Errorf("alipay %s: reply %q, want fail", c.name, reply)
		}
		_ = status
		check("alipay "+c.name, 400, reply, before)
	}
	// The refusals are counted for the alert.
	if n := e.Count(t, "SELECT COUNT(*) FROM pay_security_audit WHERE reason = 'signature'"); n < 3 {
		t.Fatalf("%d signature refusals audited", n)
	}
	h, _ := e.m.Health(ctx)
	if h.SecurityRefusals != int64(len(wcases)+len(acases)) {
		t.Fatalf("health counts %d refusals, want %d", h.SecurityRefusals, len(wcases)+len(acases))
	}
}

// TestPaymentAmountMismatch: a verified callback whose amount disagrees
// with the payment order changes nothing (failure reply, payment pending,
// no event, no entry) and opens a discrepancy with its evidence.
func TestPaymentAmountMismatch(t *testing.T) { each(t, testAmountMismatch, testAmountMismatch) }

func testAmountMismatch[TTx any](t *testing.T, e *tenv[TTx]) {
	e.start(t, startOpts{noSweep: true})
	ctx := context.Background()
	const no = "MISMATCH001"
	e.pay(t, channel.KindWeChat, no, 10000, "CNY")
	tr := e.wxSuccess(no, 1, "CNY") // the channel says 0.01
	h, body := e.wxForge(t, wxForge{tr: tr})
	status, reply := e.post(t, channel.KindWeChat, h, body)
	if status < 400 || !strings.Contains(reply, "FAIL") {
		t.Fatalf("status %d reply %q, want the failure reply", status, reply)
	}
	if s := e.state(t, no); s != PayPending {
		t.Fatalf("payment is %s", s)
	}
	if n := e.Count(t, "SELECT COUNT(*) FROM keel_events_outbox WHERE event_key = $1", no); n != 0 {
		t.Fatal("an event was emitted")
	}
	if n := e.Count(t, "SELECT COUNT(*) FROM pay_callback WHERE payment_no = $1 AND outcome = 'mismatch'", no); n != 1 {
		t.Fatalf("%d mismatch evidence rows", n)
	}
	// The same disagreement again is the same discrepancy.
	h, body = e.wxForge(t, wxForge{tr: tr})
	e.post(t, channel.KindWeChat, h, body)
	var ds []*keelrecon.DiscrepancyRow
	waitOrRuns(t, e, "the discrepancy", func() bool {
		ds, _ = e.recon.ListDiscrepancies(ctx, keelrecon.DiscrepancyFilter{Reconciler: ReconCallbacks, Limit: 10})
		return len(ds) == 1
	})
	d := ds[0]
	if d.Class != keelrecon.AmountMismatch || d.Key != "callback:"+no+":4200"+no || d.Impact != 1 || d.Currency != "CNY" {
		t.Fatalf("discrepancy %+v", d)
	}
	for _, src := range []string{"ours", "channel", "ledger", "orders"} {
		if len(d.Evidence[src]) == 0 {
			t.Fatalf("no %s evidence", src)
		}
	}
	if s := e.state(t, no); s != PayPending {
		t.Fatalf("payment is %s", s)
	}
}

// TestPaymentLateSuccessAfterClose: a payment closed on timeout (after the
// channel confirmed it unpaid and closed it) whose money then arrives goes
// to 人工核验: acknowledged, booked as a late receipt, never marked paid.
func TestPaymentLateSuccessAfterClose(t *testing.T) { each(t, testLateSuccess, testLateSuccess) }

func testLateSuccess[TTx any](t *testing.T, e *tenv[TTx]) {
	e.start(t, startOpts{noSweep: true, settings: map[string]string{"payment.pay_timeout": "1m"}}) // 60ms scaled
	ctx := context.Background()
	const no = "LATE000001"
	e.pay(t, channel.KindAlipay, no, 30000, "CNY")
	// Before the timeout a query leaves it pending.
	moduletest.WaitFor(t, 10*time.Second, "the payment timeout", func() bool {
		p, _ := e.m.Payment(ctx, no)
		return time.Now().After(p.ExpiresAt)
	})
	st, err := e.m.QueryPayment(ctx, no)
	if err != nil || st != PayClosed {
		t.Fatalf("query: %s, %v; want closed", st, err)
	}
	if e.sim.Queries(no) != 1 || e.sim.Closes(no) != 1 {
		t.Fatalf("channel saw %d queries and %d closes, want 1 and 1", e.sim.Queries(no), e.sim.Closes(no))
	}
	// The buyer's payment completes at the channel after all.
	if err := e.sim.Pay(channel.KindAlipay, no); err != nil {
		t.Fatal(err)
	}
	moduletest.WaitFor(t, 20*time.Second, "the late callback acknowledged", func() bool { return e.sim.Acks(no) == 1 })
	if s := e.state(t, no); s != PayManual {
		t.Fatalf("payment is %s, want manual", s)
	}
	hist, _ := e.m.PaymentHistory(ctx, no)
	if len(hist) != 3 || hist[1].To != PayClosed || hist[2].From != PayClosed || hist[2].To != PayManual {
		t.Fatalf("history %+v", hist)
	}
	moduletest.WaitFor(t, 20*time.Second, "the late receipt booked", func() bool {
		js, _ := e.m.Journal(ctx, no)
		return len(js) == 1 && js[0].Action == "late_receipt" && js[0].Amount == 30000
	})
	o, _ := e.m.Order(ctx, "O"+no)
	if o.State != OrderAwaiting {
		t.Fatalf("order is %s: a late success must not fulfil it", o.State)
	}
	if n := e.Count(t, "SELECT COUNT(*) FROM keel_events_outbox WHERE topic = $1", TopicPaid); n != 0 {
		t.Fatal("a success event for a closed payment")
	}
}

// waitOrRuns waits for cond and, if it never holds, says what the
// reconciliation runs recorded.
func waitOrRuns[TTx any](t *testing.T, e *tenv[TTx], what string, cond func() bool) {
	t.Helper()
	if moduletest.WaitUntil(30*time.Second, cond) {
		return
	}
	runs, _ := e.recon.ListRuns(context.Background(), keelrecon.RunFilter{Limit: 10})
	for _, r := range runs {
		t.Logf("run %d %s %s found %d error %q", r.ID, r.Reconciler, r.State, r.Found, r.Error)
	}
	t.Fatalf("timed out waiting for %s", what)
}
