package channel_test

import (
	"context"
	"net/http"
	"testing"
)

// BenchmarkVerifyWeChat is the cost of one WeChat callback's check:
// header checks, RSA-2048 signature, AES-256-GCM decryption, JSON.
func BenchmarkVerifyWeChat(b *testing.B) {
	fx := loadFixture(b)
	wx, _ := fx.channels(b)
	h, body := fx.wechatNotification(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wx.Verifier.Verify(ctx, h, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyAlipay is the cost of one Alipay notify's check: form
// decoding, sorting, RSA-2048 signature.
func BenchmarkVerifyAlipay(b *testing.B) {
	fx := loadFixture(b)
	_, ap := fx.channels(b)
	body := fx.alipayNotification(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ap.Verifier.Verify(ctx, nil, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyStripe is the cost of one Stripe webhook's check:
// HMAC-SHA256 under two secrets (a roll) and the event's JSON.
func BenchmarkVerifyStripe(b *testing.B) {
	st := loadFixture(b).stripeChannel(b)
	sig, body := stripeEvent()
	h := http.Header{"Stripe-Signature": {sig}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := st.Verifier.Verify(ctx, h, body); err != nil {
			b.Fatal(err)
		}
	}
}
