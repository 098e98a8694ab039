package channel_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/modules/payment/channel/wechatpay"
	"github.com/keelwork/keel/modules/payment/paysim"
)

// paidTrade makes a paid trade at the channel, with no callback sent.
func paidTrade(t *testing.T, sim *paysim.Sim, kind channel.Kind, no string, amount int64) {
	t.Helper()
	sim.Create(kind, no, amount, "CNY")
	if err := sim.PayWithoutCallback(kind, no); err != nil {
		t.Fatal(err)
	}
}

// reSign rewrites a WeChat notification's resource and signs the new body
// with the channel's own key, so the change reaches the decryption step.
func reSign(t *testing.T, sim *paysim.Sim, body []byte, edit func(*wechatpay.Resource)) (http.Header, []byte) {
	t.Helper()
	var env wechatpay.Notification
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	edit(&env.Resource)
	nb, _ := json.Marshal(env)
	return sim.SignWeChat(nb, "", time.Time{}, nil), nb
}

func TestChannelCallbackVerifyWeChat(t *testing.T) {
	t.Parallel()
	sim := startSim(t, paysim.Options{})
	v := newChannel(t, sim.Config(channel.KindWeChat)).Verifier
	ctx := ctxT(t)
	const no = "T20260714001"
	paidTrade(t, sim, channel.KindWeChat, no, 128800)
	h, body, err := sim.Notification(channel.KindWeChat, no)
	if err != nil {
		t.Fatal(err)
	}
	tv, _ := sim.Trade(channel.KindWeChat, no)
	n, err := v.Verify(ctx, h, body)
	if err != nil {
		t.Fatalf("valid callback: %v", err)
	}
	m := sim.Config(channel.KindWeChat)
	if n.Event != channel.EventPayment || n.State != channel.StatePaid || n.OutTradeNo != no || n.AmountMinor != 128800 ||
		n.Currency != "CNY" || n.MerchantID != m.MerchantID || n.AppID != m.AppID || n.TransactionID != tv.TransactionID ||
		n.NotifyID == "" || !n.At.Equal(tv.PaidAt.Truncate(time.Second).UTC()) {
		t.Fatalf("notice %+v does not say what the channel has (%+v)", n, tv)
	}

	other, err := paysim.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	tamperedBody := bytes.Replace(body, []byte(`"id":"`), []byte(`"id":"X`), 1)
	badSig := h.Clone()
	sig, _ := base64.StdEncoding.DecodeString(h.Get(wechatpay.HeaderSignature))
	sig[10] ^= 1
	badSig.Set(wechatpay.HeaderSignature, base64.StdEncoding.EncodeToString(sig))
	ctH, ctBody := reSign(t, sim, body, func(r *wechatpay.Resource) {
		raw, _ := base64.StdEncoding.DecodeString(r.Ciphertext)
		raw[3] ^= 1
		r.Ciphertext = base64.StdEncoding.EncodeToString(raw)
	})
	adH, adBody := reSign(t, sim, body, func(r *wechatpay.Resource) { r.AssociatedData = "transaction2" })
	nonceH, nonceBody := reSign(t, sim, body, func(r *wechatpay.Resource) { r.Nonce = "AAAAAAAAAAAA" })
	noHeader := h.Clone()
	noHeader.Del(wechatpay.HeaderNonce)
	for _, c := range []struct {
		name string
		h    http.Header
		body []byte
		want error
	}{
		{"tampered body", h, tamperedBody, channel.ErrSignature},
		{"tampered signature", badSig, body, channel.ErrSignature},
		{"tampered ciphertext", ctH, ctBody, channel.ErrDecrypt},
		{"tampered associated data", adH, adBody, channel.ErrDecrypt},
		{"tampered nonce", nonceH, nonceBody, channel.ErrDecrypt},
		{"signed with another key", sim.SignWeChat(body, "", time.Time{}, other), body, channel.ErrSignature},
		{"timestamp 6 minutes old", sim.SignWeChat(body, "", time.Now().Add(-6*time.Minute), nil), body, channel.ErrSkew},
		{"timestamp 6 minutes ahead", sim.SignWeChat(body, "", time.Now().Add(6*time.Minute), nil), body, channel.ErrSkew},
		{"missing nonce header", noHeader, body, channel.ErrMalformed},
	} {
		if _, err := v.Verify(ctx, c.h, c.body); !errorsIs(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := v.Verify(ctx, sim.SignWeChat(body, "", time.Now().Add(-4*time.Minute), nil), body); err != nil {
		t.Errorf("timestamp 4 minutes old is inside the window: %v", err)
	}
	if got := sim.CertFetches(); got != 0 {
		t.Fatalf("%d certificate downloads before any unknown serial", got)
	}

	// An unknown serial downloads the certificate set once, then fails; the
	// same serial again does not ask the channel again.
	for i := range 2 {
		_, err := v.Verify(ctx, sim.SignWeChat(body, "5157F09EFDC096DE15EBE81A47057A7232F1B8E1", time.Time{}, nil), body)
		wantErr(t, "unknown serial", err, channel.ErrUnknownSerial)
		if got := sim.CertFetches(); got != 1 {
			t.Fatalf("after unknown serial #%d: %d certificate downloads, want 1", i+1, got)
		}
	}

	// The channel rotates its key: the new serial is fetched once and works.
	serial, err := sim.RotateKey(channel.KindWeChat)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		h2, body2, _ := sim.Notification(channel.KindWeChat, no)
		if h2.Get(wechatpay.HeaderSerial) != serial {
			t.Fatalf("notification signed by %s, want the new %s", h2.Get(wechatpay.HeaderSerial), serial)
		}
		if _, err := v.Verify(ctx, h2, body2); err != nil {
			t.Fatalf("callback under the rotated key: %v", err)
		}
	}
	if got := sim.CertFetches(); got != 2 {
		t.Fatalf("%d certificate downloads after rotation, want 2 (one for the forged serial, one for the rotation)", got)
	}
	// Calls still verify the channel's answers under the new key.
	if _, err := newChannel(t, sim.Config(channel.KindWeChat)).Client.QueryPayment(ctx, no); err != nil {
		t.Fatalf("query after rotation: %v", err)
	}
}

func errorsIs(err, target error) bool { return err != nil && (target == nil || errorIs(err, target)) }

func TestChannelCallbackVerifyWeChatRefund(t *testing.T) {
	t.Parallel()
	sim := startSim(t, paysim.Options{})
	ch := newChannel(t, sim.Config(channel.KindWeChat))
	ctx := ctxT(t)
	paidTrade(t, sim, channel.KindWeChat, "W-R", 5000)
	if _, err := ch.Client.Refund(ctx, channel.RefundRequest{OutTradeNo: "W-R", OutRefundNo: "W-R-1", AmountMinor: 1200, TotalMinor: 5000, Currency: "CNY"}); err != nil {
		t.Fatal(err)
	}
	h, body, err := sim.RefundNotification(channel.KindWeChat, "W-R-1")
	if err != nil {
		t.Fatal(err)
	}
	n, err := ch.Verifier.Verify(ctx, h, body)
	if err != nil || n.Event != channel.EventRefund || n.State != channel.StateRefunded || n.OutRefundNo != "W-R-1" ||
		n.AmountMinor != 1200 || n.RefundID == "" || n.OutTradeNo != "W-R" {
		t.Fatalf("refund notice %+v, %v", n, err)
	}
}

func TestChannelCallbackVerifyAlipay(t *testing.T) {
	t.Parallel()
	sim := startSim(t, paysim.Options{})
	ch := newChannel(t, sim.Config(channel.KindAlipay))
	v := ch.Verifier
	ctx := ctxT(t)
	const no = "T20260714001"
	paidTrade(t, sim, channel.KindAlipay, no, 128800)
	h, body, err := sim.Notification(channel.KindAlipay, no)
	if err != nil {
		t.Fatal(err)
	}
	tv, _ := sim.Trade(channel.KindAlipay, no)
	m := sim.Config(channel.KindAlipay)
	n, err := v.Verify(ctx, h, body)
	if err != nil {
		t.Fatalf("valid notify: %v", err)
	}
	if n.Event != channel.EventPayment || n.State != channel.StatePaid || n.AmountMinor != 128800 || n.AppID != m.AppID ||
		n.MerchantID != m.MerchantID || n.TransactionID != tv.TransactionID || n.NotifyID == "" || n.At.IsZero() {
		t.Fatalf("notice %+v does not say what the channel has (%+v)", n, tv)
	}
	p, _ := url.ParseQuery(string(body))
	other, err := paysim.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	with := func(k, val string) []byte {
		q, _ := url.ParseQuery(string(body))
		q.Set(k, val)
		return []byte(q.Encode())
	}
	sig, _ := base64.StdEncoding.DecodeString(p.Get("sign"))
	sig[7] ^= 1
	for _, c := range []struct {
		name string
		body []byte
		want error
	}{
		{"tampered amount", with("total_amount", "1.00"), channel.ErrSignature},
		{"tampered seller", with("seller_id", "2088000000000001"), channel.ErrSignature},
		{"tampered signature", with("sign", base64.StdEncoding.EncodeToString(sig)), channel.ErrSignature},
		{"signed with another key", sim.SignAlipay(p, other), channel.ErrSignature},
		{"sign_type RSA", with("sign_type", "RSA"), channel.ErrSignature},
		{"no sign", with("sign", ""), channel.ErrSignature},
		{"repeated parameter", append(append([]byte{}, body...), "&total_amount=1.00"...), channel.ErrMalformed},
		{"not a form", []byte("%zz"), channel.ErrMalformed},
		{"empty", nil, channel.ErrMalformed},
	} {
		if _, err := v.Verify(ctx, h, c.body); !errorsIs(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Sign covers form-decoded values: an encoding change of the same
	// values still verifies.
	if _, err := v.Verify(ctx, h, []byte(strings.ReplaceAll(string(body), "+", "%20"))); err != nil {
		t.Errorf("same values encoded differently: %v", err)
	}

	if _, err := ch.Client.Refund(ctx, channel.RefundRequest{OutTradeNo: no, OutRefundNo: no + "-1", AmountMinor: 800, TotalMinor: 128800, Currency: "CNY"}); err != nil {
		t.Fatal(err)
	}
	h, body, err = sim.RefundNotification(channel.KindAlipay, no+"-1")
	if err != nil {
		t.Fatal(err)
	}
	n, err = v.Verify(ctx, h, body)
	if err != nil || n.Event != channel.EventRefund || n.OutRefundNo != no+"-1" || n.RefundedTotalMinor != 800 || n.AmountMinor != 0 {
		t.Fatalf("refund notify %+v, %v", n, err)
	}
}

// TestChannelAckFail checks the replies' wire form.
func TestChannelAckFail(t *testing.T) {
	t.Parallel()
	sim := startSim(t, paysim.Options{})
	wx := newChannel(t, sim.Config(channel.KindWeChat)).Verifier
	ap := newChannel(t, sim.Config(channel.KindAlipay)).Verifier
	rec := httptest.NewRecorder()
	wx.Ack(rec)
	if rec.Code != http.StatusNoContent || rec.Body.Len() != 0 {
		t.Fatalf("wechat ack %d %q", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	wx.Fail(rec, http.StatusBadRequest, "验签失败")
	var e wechatpay.Error
	if rec.Code != 400 || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Code != "FAIL" || e.Message != "验签失败" {
		t.Fatalf("wechat fail %d %q", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	ap.Ack(rec)
	if rec.Code != 200 || rec.Body.String() != "success" {
		t.Fatalf("alipay ack %d %q", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	ap.Fail(rec, 400, "x")
	if rec.Body.String() != "fail" {
		t.Fatalf("alipay fail %q", rec.Body)
	}
	_ = context.Background
}
