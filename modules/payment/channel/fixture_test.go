package channel_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/modules/payment/channel/alipay"
	"github.com/keelwork/keel/modules/payment/channel/wechatpay"
)

// The fuzz targets and benchmarks verify without a network: a fixture of
// committed test-only keys (testdata/fixture) and a frozen clock, so the
// committed seeds stay valid. `go test -run TestFuzzSeeds -update-seeds`
// regenerates keys and seeds.
var updateSeeds = flag.Bool("update-seeds", false, "regenerate testdata/fixture and the fuzz seed corpus")

var fixtureNow = time.Date(2026, 7, 14, 10, 0, 5, 0, time.UTC)

const (
	fixtureAPIv3Key = "0123456789abcdefghijABCDEFGHIJ01"
	fixtureMchID    = "1900000109"
	fixtureAppID    = "wxd678efh567hg6787"
	fixtureSeller   = "2088102146225135"
	fixtureAliApp   = "2021000116697718"
)

type fixture struct {
	platform *rsa.PrivateKey // WeChat platform key (the channel's)
	certPEM  []byte
	serial   string
	gateway  *rsa.PrivateKey // Alipay's key
	merchant *rsa.PrivateKey // Keel's (both channels)
}

func fixtureDir() string { return filepath.Join("testdata", "fixture") }

func loadFixture(tb testing.TB) *fixture {
	tb.Helper()
	if *updateSeeds {
		if _, err := os.Stat(filepath.Join(fixtureDir(), "platform.pem")); err != nil {
			writeFixture(tb)
		}
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(fixtureDir(), name))
		if err != nil {
			tb.Fatalf("fixture: %v (run with -update-seeds)", err)
		}
		return b
	}
	key := func(name string) *rsa.PrivateKey {
		k, err := wechatpay.ParsePrivateKey(read(name))
		if err != nil {
			tb.Fatal(err)
		}
		return k
	}
	fx := &fixture{platform: key("platform.pem"), gateway: key("gateway.pem"), merchant: key("merchant.pem"), certPEM: read("platform.crt")}
	_, serial, _, err := wechatpay.ParseCertificate(fx.certPEM)
	if err != nil {
		tb.Fatal(err)
	}
	fx.serial = serial
	return fx
}

func writeFixture(tb testing.TB) {
	tb.Helper()
	if err := os.MkdirAll(fixtureDir(), 0o755); err != nil {
		tb.Fatal(err)
	}
	keys := map[string]*rsa.PrivateKey{}
	for _, name := range []string{"platform.pem", "gateway.pem", "merchant.pem"} {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			tb.Fatal(err)
		}
		keys[name] = k
		if err := os.WriteFile(filepath.Join(fixtureDir(), name), pemPrivate(k), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(0x5157F09EFDC096DE), Subject: pkix.Name{CommonName: "test platform"},
		NotBefore: fixtureNow.Add(-time.Hour), NotAfter: fixtureNow.Add(20 * 365 * 24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &keys["platform.pem"].PublicKey, keys["platform.pem"])
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fixtureDir(), "platform.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// channels builds both channels on the fixture; the WeChat BaseURL points
// at a closed port, so an unknown serial's refresh fails fast.
func (fx *fixture) channels(tb testing.TB) (wx, ap *channel.Channel) {
	tb.Helper()
	now := func() time.Time { return fixtureNow }
	var err error
	wx, err = channel.New(context.Background(), channel.Config{Kind: channel.KindWeChat, BaseURL: "http://127.0.0.1:1",
		MerchantID: fixtureMchID, AppID: fixtureAppID, MerchantKeyPEM: pemPrivate(fx.merchant), MerchantSerial: "3775B6A45ACD588826D15E583A95F5DD00000000",
		APIv3Key: fixtureAPIv3Key, PublicKeyPEM: fx.certPEM, HTTPTimeout: time.Second, Now: now})
	if err != nil {
		tb.Fatal(err)
	}
	ap, err = channel.New(context.Background(), channel.Config{Kind: channel.KindAlipay, BaseURL: "http://127.0.0.1:1/gateway.do",
		MerchantID: fixtureSeller, AppID: fixtureAliApp, MerchantKeyPEM: pemPrivate(fx.merchant), PublicKeyPEM: pemPublic(fx.gateway),
		HTTPTimeout: time.Second, Now: now})
	if err != nil {
		tb.Fatal(err)
	}
	return wx, ap
}

const fixtureWebhookSecret = "whsec_fixture0123456789abcdefghijkl"

// stripeChannel is a Stripe channel on the fixture secret whose tolerance
// spans the frozen seeds' age.
func (fx *fixture) stripeChannel(tb testing.TB) *channel.Channel {
	tb.Helper()
	st, err := channel.New(context.Background(), channel.Config{Kind: channel.KindStripe, BaseURL: "http://127.0.0.1:1",
		MerchantID: "acct_fixture", APIKey: "sk_test_fixture", WebhookSecrets: []string{"whsec_old", fixtureWebhookSecret},
		WebhookTolerance: 100 * 365 * 24 * time.Hour, HTTPTimeout: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

// stripeEvent is a valid payment_intent.succeeded webhook at fixtureNow.
func stripeEvent() (string, []byte) {
	body := []byte(`{"id":"evt_fixture","object":"event","api_version":"2025-08-27.basil","created":1784023205,"type":"payment_intent.succeeded",` +
		`"data":{"object":{"id":"pi_fixture","object":"payment_intent","amount":128800,"amount_received":128800,"currency":"usd",` +
		`"created":1784023200,"status":"succeeded","metadata":{"out_trade_no":"T20260714001"}}}}`)
	return stripeSig(body), body
}

func stripeSig(body []byte) string {
	ts := strconv.FormatInt(fixtureNow.Unix(), 10)
	m := hmac.New(sha256.New, []byte(fixtureWebhookSecret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// wechatNotification is a valid TRANSACTION.SUCCESS callback at fixtureNow.
func (fx *fixture) wechatNotification(tb testing.TB) (http.Header, []byte) {
	tb.Helper()
	plain, _ := json.Marshal(wechatpay.Transaction{AppID: fixtureAppID, MchID: fixtureMchID, OutTradeNo: "T20260714001",
		TransactionID: "4200000001202607140000000001", TradeType: "JSAPI", TradeState: "SUCCESS", TradeStateDesc: "支付成功",
		BankType: "CMB_DEBIT", SuccessTime: "2026-07-14T18:00:00+08:00", Payer: &wechatpay.Payer{OpenID: "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"},
		Amount: &wechatpay.Money{Total: 128800, PayerTotal: 128800, Currency: "CNY", PayerCurrency: "CNY"}})
	const nonce = "fixturenonce"
	ct, err := wechatpay.Encrypt(fixtureAPIv3Key, nonce, "transaction", plain)
	if err != nil {
		tb.Fatal(err)
	}
	body, _ := json.Marshal(wechatpay.Notification{ID: "EV-2026071410000501", CreateTime: "2026-07-14T18:00:05+08:00",
		EventType: "TRANSACTION.SUCCESS", ResourceType: "encrypt-resource", Summary: "支付成功",
		Resource: wechatpay.Resource{Algorithm: wechatpay.AlgorithmAEAD, Ciphertext: ct, AssociatedData: "transaction", OriginalType: "transaction", Nonce: nonce}})
	ts := strconv.FormatInt(fixtureNow.Unix(), 10)
	const hn = "5K8264ILTKCH16CQ2502SI8ZNMTM67VS"
	sig, err := wechatpay.Sign(fx.platform, wechatpay.NotifyMessage(ts, hn, body))
	if err != nil {
		tb.Fatal(err)
	}
	h := http.Header{}
	h.Set(wechatpay.HeaderTimestamp, ts)
	h.Set(wechatpay.HeaderNonce, hn)
	h.Set(wechatpay.HeaderSignature, sig)
	h.Set(wechatpay.HeaderSerial, fx.serial)
	return h, body
}

// alipayNotification is a valid trade_status_sync notify body.
func (fx *fixture) alipayNotification(tb testing.TB) []byte {
	tb.Helper()
	p := url.Values{"notify_time": {"2026-07-14 18:00:05"}, "notify_type": {"trade_status_sync"}, "notify_id": {"ac05099524730693a8b330c5ecf72da9786"},
		"app_id": {fixtureAliApp}, "charset": {"utf-8"}, "version": {"1.0"}, "trade_no": {"2026071422001404010000000001"},
		"out_trade_no": {"T20260714001"}, "seller_id": {fixtureSeller}, "trade_status": {"TRADE_SUCCESS"},
		"total_amount": {"1288.00"}, "receipt_amount": {"1288.00"}, "subject": {"Keel 订单"}, "gmt_payment": {"2026-07-14 18:00:00"},
		"sign_type": {"RSA2"}}
	sig, err := alipay.Sign(fx.gateway, []byte(alipay.SignContent(p, "sign", "sign_type")))
	if err != nil {
		tb.Fatal(err)
	}
	p.Set("sign", sig)
	return []byte(p.Encode())
}

// seedFile writes one corpus entry in the `go test fuzz v1` format.
func seedFile(tb testing.TB, target, name string, values ...any) {
	tb.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	s := "go test fuzz v1\n"
	for _, v := range values {
		switch v := v.(type) {
		case string:
			s += "string(" + strconv.Quote(v) + ")\n"
		case []byte:
			s += "[]byte(" + strconv.Quote(string(v)) + ")\n"
		default:
			tb.Fatalf("seed value %T", v)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// readSeed returns the values of a committed corpus entry.
func readSeed(t *testing.T, target, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fuzz", target, name))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] {
		open := strings.IndexByte(line, '(')
		v, err := strconv.Unquote(line[open+1 : len(line)-1])
		if err != nil {
			t.Fatalf("%s/%s: %v", target, name, err)
		}
		out = append(out, v)
	}
	return out
}

// TestFuzzSeeds checks that the committed valid seeds still verify (so the
// fuzzers start from inputs that reach the deepest code), and rewrites them
// with -update-seeds.
func TestFuzzSeeds(t *testing.T) {
	fx := loadFixture(t)
	wx, ap := fx.channels(t)
	h, body := fx.wechatNotification(t)
	if _, err := wx.Verifier.Verify(context.Background(), h, body); err != nil {
		t.Fatalf("fixture WeChat notification: %v", err)
	}
	abody := fx.alipayNotification(t)
	if _, err := ap.Verifier.Verify(context.Background(), nil, abody); err != nil {
		t.Fatalf("fixture Alipay notification: %v", err)
	}
	if !*updateSeeds {
		// The committed seeds themselves must still be accepted.
		seed := readSeed(t, "FuzzWeChatVerify", "valid")
		sh := http.Header{}
		sh.Set(wechatpay.HeaderTimestamp, seed[0])
		sh.Set(wechatpay.HeaderNonce, seed[1])
		sh.Set(wechatpay.HeaderSignature, seed[2])
		sh.Set(wechatpay.HeaderSerial, seed[3])
		if _, err := wx.Verifier.Verify(context.Background(), sh, []byte(seed[4])); err != nil {
			t.Fatalf("committed WeChat seed: %v", err)
		}
		if _, err := ap.Verifier.Verify(context.Background(), nil, []byte(readSeed(t, "FuzzAlipayVerify", "valid")[0])); err != nil {
			t.Fatalf("committed Alipay seed: %v", err)
		}
		ss := readSeed(t, "FuzzStripeVerify", "valid")
		if _, err := fx.stripeChannel(t).Verifier.Verify(context.Background(), http.Header{"Stripe-Signature": {ss[0]}}, []byte(ss[1])); err != nil {
			t.Fatalf("committed Stripe seed: %v", err)
		}
		return
	}
	g := func(k string) string { return h.Get(k) }
	seedFile(t, "FuzzWeChatVerify", "valid", g(wechatpay.HeaderTimestamp), g(wechatpay.HeaderNonce), g(wechatpay.HeaderSignature), g(wechatpay.HeaderSerial), body)
	seedFile(t, "FuzzWeChatVerify", "unknown-serial", g(wechatpay.HeaderTimestamp), g(wechatpay.HeaderNonce), g(wechatpay.HeaderSignature), "ABCDEF", body)
	seedFile(t, "FuzzWeChatVerify", "skew", "1", g(wechatpay.HeaderNonce), g(wechatpay.HeaderSignature), g(wechatpay.HeaderSerial), body)
	sig, sbody := stripeEvent()
	if _, err := fx.stripeChannel(t).Verifier.Verify(context.Background(), http.Header{"Stripe-Signature": {sig}}, sbody); err != nil {
		t.Fatalf("fixture Stripe event: %v", err)
	}
	seedFile(t, "FuzzStripeVerify", "valid", sig, sbody)
	seedFile(t, "FuzzStripeVerify", "two-signatures", sig+",v1=00ff", sbody)
	seedFile(t, "FuzzAlipayVerify", "valid", abody)
	seedFile(t, "FuzzAlipayVerify", "repeated", append(append([]byte{}, abody...), "&total_amount=1.00"...))
	seedFile(t, "FuzzAlipayVerify", "no-sign", []byte("out_trade_no=T1&trade_no=2&sign_type=RSA2"))
	fmt.Println("fuzz seeds written")
}
