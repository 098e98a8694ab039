package channel_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/keelwork/keel/modules/payment/channel/wechatpay"
)

// FuzzWeChatVerify: no header or body makes the verifier panic, and
// anything it accepts is a complete notice.
func FuzzWeChatVerify(f *testing.F) {
	fx := loadFixture(f)
	wx, _ := fx.channels(f)
	f.Fuzz(func(t *testing.T, ts, nonce, sig, serial string, body []byte) {
		h := http.Header{}
		h.Set(wechatpay.HeaderTimestamp, ts)
		h.Set(wechatpay.HeaderNonce, nonce)
		h.Set(wechatpay.HeaderSignature, sig)
		h.Set(wechatpay.HeaderSerial, serial)
		n, err := wx.Verifier.Verify(context.Background(), h, body)
		if err == nil && (n == nil || n.OutTradeNo == "" || n.State == "") {
			t.Fatalf("accepted an incomplete notice %+v", n)
		}
	})
}

// FuzzAlipayVerify: no body makes the verifier panic, and anything it
// accepts names the trade, the app and the seller.
func FuzzAlipayVerify(f *testing.F) {
	fx := loadFixture(f)
	_, ap := fx.channels(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := ap.Verifier.Verify(context.Background(), nil, body)
		if err == nil && (n == nil || n.OutTradeNo == "" || n.AppID == "" || n.MerchantID == "") {
			t.Fatalf("accepted an incomplete notice %+v", n)
		}
	})
}

// FuzzStripeVerify: no header or body makes the webhook verifier panic,
// and anything it accepts names the trade.
func FuzzStripeVerify(f *testing.F) {
	st := loadFixture(f).stripeChannel(f)
	f.Fuzz(func(t *testing.T, sig string, body []byte) {
		n, err := st.Verifier.Verify(context.Background(), http.Header{"Stripe-Signature": {sig}}, body)
		if err == nil && (n == nil || n.OutTradeNo == "" || n.State == "") {
			t.Fatalf("accepted an incomplete notice %+v", n)
		}
	})
}
