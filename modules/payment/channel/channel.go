// Package channel is the seam between Keel's payment module and the payment
// channels it talks to (WeChat Pay API v3, Alipay, optionally Stripe): the
// normalised vocabulary of callbacks, queries, refunds and bills, the
// verifier that authenticates a callback, and the client that calls the
// channel. Everything channel-specific (signatures, encryption, wire formats)
// stays behind these types.
package channel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Kind names a payment channel: "wechat", "alipay" or "stripe".
type Kind string

// The channels this package knows.
const (
	KindWeChat Kind = "wechat"
	KindAlipay Kind = "alipay"
	KindStripe Kind = "stripe"
)

// Event is what a callback or query is about.
type Event string

// The events a notice or bill line can be about.
const (
	EventPayment Event = "payment"
	EventRefund  Event = "refund"
)

// State is the channel's word for a trade or refund, normalised.
type State string

// The normalised states. The comments name the channel words they stand for.
const (
	StatePaid       State = "paid"          // WeChat SUCCESS, Alipay TRADE_SUCCESS / TRADE_FINISHED
	StateNotPaid    State = "not_paid"      // NOTPAY / WAIT_BUYER_PAY
	StateClosed     State = "closed"        // CLOSED / TRADE_CLOSED
	StateRefunded   State = "refunded"      // refund SUCCESS
	StateRefunding  State = "refunding"     // refund PROCESSING
	StateRefundFail State = "refund_failed" // refund ABNORMAL/CLOSED: proven not executed
)

// Notice is one verified callback (or a query's answer in the same shape).
type Notice struct {
	Channel       Kind
	Event         Event
	NotifyID      string    // the channel's notification id, if any
	MerchantID    string    // WeChat mchid, Alipay seller_id
	AppID         string    // WeChat appid, Alipay app_id
	OutTradeNo    string    // our payment number
	TransactionID string    // the channel's transaction id
	OutRefundNo   string    // our refund number (refund events)
	RefundID      string    // the channel's refund id
	AmountMinor   int64     // the paid (or refunded) amount in minor units
	Currency      string    // ISO 4217
	State         State     // normalised state of the trade or refund
	At            time.Time // success / refund time, UTC
	// RefundedTotalMinor is the trade's cumulative refunded amount where the
	// channel states it (Alipay refund_fee). Alipay's refund notify carries
	// only this total, not the single refund's amount: there AmountMinor is
	// 0 and the refund is confirmed with Client.QueryRefund.
	RefundedTotalMinor int64
}

// Sentinel errors, matched with errors.Is. Verify's errors wrap one of the
// first group; client errors wrap one of the second.
var (
	ErrSignature     = errors.New("channel: signature does not verify")
	ErrSkew          = errors.New("channel: timestamp outside the allowed window")
	ErrUnknownSerial = errors.New("channel: unknown platform certificate serial")
	ErrDecrypt       = errors.New("channel: resource does not decrypt")
	ErrMalformed     = errors.New("channel: malformed notification")
	// Client errors:
	ErrUnknownOutcome = errors.New("channel: outcome unknown") // timeout, 5xx, connection lost after sending
	ErrNotFound       = errors.New("channel: no such trade or refund")
	ErrRejected       = errors.New("channel: request rejected") // a 4xx business refusal: permanent
)

// Verifier checks one callback from its headers and raw body (read before
// any parsing: the signature covers the exact bytes).
type Verifier interface {
	// Verify authenticates the callback and returns what it says.
	Verify(ctx context.Context, h http.Header, body []byte) (*Notice, error)
	// Ack writes the channel's success reply (WeChat 200/204 empty or {"code":"SUCCESS"}; Alipay "success").
	Ack(w http.ResponseWriter)
	// Fail writes the channel's failure reply (WeChat 4xx/5xx {"code":"FAIL","message":...}; Alipay "fail").
	Fail(w http.ResponseWriter, status int, message string)
}

// RefundRequest asks the channel to refund part or all of one trade.
// OutRefundNo is the idempotency key the channel deduplicates on.
type RefundRequest struct {
	OutTradeNo, OutRefundNo string
	AmountMinor, TotalMinor int64
	Currency, Reason        string
}

// BillLine is one row of a daily bill.
type BillLine struct {
	Day           string // YYYY-MM-DD, channel's day
	Event         Event
	MerchantID    string
	OutTradeNo    string
	TransactionID string
	OutRefundNo   string
	RefundID      string
	AmountMinor   int64
	FeeMinor      int64
	Currency      string
	State         State
	At            time.Time
}

// Client calls the channel's API. Every error wraps ErrUnknownOutcome,
// ErrNotFound or ErrRejected when the outcome is one of those.
type Client interface {
	// QueryPayment returns the trade's state; ErrNotFound if the channel never saw it.
	QueryPayment(ctx context.Context, outTradeNo string) (*Notice, error)
	// ClosePayment closes an unpaid trade.
	ClosePayment(ctx context.Context, outTradeNo string) error
	// Refund asks for a refund; ErrUnknownOutcome on timeout/5xx (query before retrying).
	Refund(ctx context.Context, r RefundRequest) (*Notice, error)
	// QueryRefund returns the refund's state; ErrNotFound means it was not executed.
	QueryRefund(ctx context.Context, outTradeNo, outRefundNo string) (*Notice, error)
	// Bill downloads and parses the channel's trade bill for one day: the
	// channel's day (China time for WeChat and Alipay) containing the instant day.
	Bill(ctx context.Context, day time.Time) ([]BillLine, error)
}

// Channel is one configured channel.
type Channel struct {
	Kind     Kind
	Verifier Verifier
	Client   Client
}

// Config is what a channel needs; paysim produces one for its servers.
type Config struct {
	Kind       Kind
	BaseURL    string // the channel's API (the simulator's in tests and keel dev)
	MerchantID string
	AppID      string
	// WeChat: merchant private key + serial (request signing), APIv3 key (AEAD), platform keys by serial
	// (fetched from /v3/certificates and refreshed once on an unknown serial).
	// Alipay: app private key (request signing), Alipay public key (response + notify verification).
	MerchantKeyPEM []byte
	MerchantSerial string
	APIv3Key       string
	PublicKeyPEM   []byte
	HTTPTimeout    time.Duration
	Now            func() time.Time
	// Stripe: the secret API key, the webhook endpoint's signing secrets
	// (whsec_…; several while one is being rolled, any may match) and how
	// old a signed webhook may be (default 5 minutes).
	APIKey           string
	WebhookSecrets   []string
	WebhookTolerance time.Duration
}

// New builds a configured channel. Channel kinds are registered by the
// implementation files of this package.
func New(ctx context.Context, cfg Config) (*Channel, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPTimeout <= 0 {
		cfg.HTTPTimeout = 10 * time.Second
	}
	b, ok := builders[cfg.Kind]
	if !ok {
		return nil, fmt.Errorf("channel: unknown kind %q", cfg.Kind)
	}
	return b(ctx, cfg)
}

// builders maps a kind to its constructor; each implementation registers
// itself in an init function so channel.go stays the stable seam.
var builders = map[Kind]func(context.Context, Config) (*Channel, error){}
