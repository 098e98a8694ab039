package channel_test

import (
	"context"
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
