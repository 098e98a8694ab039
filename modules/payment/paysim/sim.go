// Package paysim simulates the payment channels Keel talks to: one real HTTP
// server per channel on loopback (WeChat Pay API v3 and the Alipay gateway),
// with their own RSA keys and a self-signed WeChat platform certificate,
// speaking the same wire formats as package channel's client (both use the
// wire packages wechatpay and alipay). It is the outside world: it keeps
// trades and refunds in memory, verifies Keel's request signatures and
// refuses bad ones, signs its answers and callbacks, sends callbacks on
// the channel's published retry schedule (compressed by TimeScale) until
// acknowledged, and produces daily bills.
//
// Knobs make it misbehave the way channels do: duplicate, reorder or lose
// callbacks, rotate the platform key, execute a refund and then time out,
// refuse a refund, and bills with injected discrepancies. Counters tell a
// test what the channel saw from the customer's side.
package paysim

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelwork/keel/modules/payment/channel"
)

// Merchant is the merchant identity Keel has at a channel.
type Merchant struct {
	MerchantID string // WeChat mchid / Alipay seller_id (2088…)
	AppID      string // WeChat appid / Alipay app_id
}

// Options configure a simulator. Zero values take the documented defaults.
type Options struct {
	// NotifyURL is where each channel sends its callbacks (Keel's ingress).
	// A channel without one sends none.
	NotifyURL map[channel.Kind]string
	// TimeScale divides the published retry schedule: 1 is real time, 3600
	// turns an hour into a second. Default 1.
	TimeScale float64
	// Merchants override the default merchant identities per channel.
	Merchants map[channel.Kind]Merchant
	// CallbackTimeout is how long the channel waits for Keel's reply to one
	// callback before counting it failed. Default 5s.
	CallbackTimeout time.Duration
	// ClientTimeout is the HTTPTimeout put in Config. Default 5s.
	ClientTimeout time.Duration
	// RefundCallbacks makes the channels notify refunds too (WeChat
	// REFUND.SUCCESS, Alipay trade_status_sync with out_biz_no).
	RefundCallbacks bool
	// Now is the channel's clock. Default time.Now.
	Now func() time.Time
}

// Behaviour is how the channel treats one refund number.
type Behaviour int

const (
	// Normal executes the refund and answers.
	Normal Behaviour = iota
	// ExecuteThenTimeout executes the refund on the first call and never
	// answers it (the client times out: outcome unknown). Later calls and
	// queries answer normally, showing the refund executed.
	ExecuteThenTimeout
	// ExecuteThenDisconnect executes the refund on the first call and cuts
	// the connection instead of answering.
	ExecuteThenDisconnect
	// FailNotExecuted answers the first call with a server error without
	// executing; the query then proves it was not executed, and a retry
	// with the same number executes it.
	FailNotExecuted
	// Refused answers every call with a business refusal (insufficient
	// balance), executing nothing.
	Refused
	// Unavailable answers every refund call and refund query with a server
	// error: the outcome stays unknown for as long as it is set.
	Unavailable
	// Abnormal (WeChat) accepts the refund, which then ends ABNORMAL: the
	// money did not move.
	Abnormal
	// Processing (WeChat, Stripe) accepts the refund and leaves it
	// PROCESSING / pending until SettleRefund. Alipay refunds synchronously,
	// so there it behaves as Normal.
	Processing
)

type key struct {
	kind channel.Kind
	no   string
}

// Sim is a running simulator of both channels.
type Sim struct {
	opts Options
	now  func() time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	http   *http.Client

	wx *wxServer
	ap *apServer
	st *stServer

	mu          sync.Mutex
	notify      map[channel.Kind]string
	trades      map[key]*trade
	refunds     map[key]*refund
	behaviour   map[string]Behaviour
	refundTrade map[string]string // out_refund_no → out_trade_no of every refund call
	used        map[string]bool   // behaviour already applied once
	injections  map[channel.Kind][]Injection
	dupNext     int
	reorderNext bool
	loseNext    int
	held        []chan struct{}
	c           counters
	seq         atomic.Int64
	// run is the second of the day (China time, five digits) this
	// simulator started at, part of every id it makes: a channel never
	// gives two payments one transaction id, and with the counter alone a
	// restarted simulator (a second `keel dev` on the same data) gave its
	// first payments the ids of the last run's, which the module rightly
	// refused as paying another order.
	run string
}

type counters struct {
	sent, acked, lost           map[string]int // payment callbacks by out_trade_no
	refundSent, refundAcked     map[string]int // refund callbacks by out_refund_no
	queries, refundQueries      map[string]int
	refundCalls, closes         map[string]int
	certFetches, rejected, gave int
}

// Start runs the simulator's servers on 127.0.0.1 with ephemeral ports.
// They stop when ctx ends or Close is called.
func Start(ctx context.Context, opts Options) (*Sim, error) {
	if opts.TimeScale <= 0 {
		opts.TimeScale = 1
	}
	if opts.CallbackTimeout <= 0 {
		opts.CallbackTimeout = 5 * time.Second
	}
	if opts.ClientTimeout <= 0 {
		opts.ClientTimeout = 5 * time.Second
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	keys, err := sharedKeys()
	if err != nil {
		return nil, fmt.Errorf("paysim: generating keys: %w", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	started := time.Now().In(chinaTime)
	s := &Sim{opts: opts, now: now, ctx: cctx, cancel: cancel,
		run: fmt.Sprintf("%05d", started.Hour()*3600+started.Minute()*60+started.Second()),
		http: &http.Client{Timeout: opts.CallbackTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		notify: map[channel.Kind]string{}, trades: map[key]*trade{}, refunds: map[key]*refund{}, behaviour: map[string]Behaviour{}, refundTrade: map[string]string{},
		used: map[string]bool{}, injections: map[channel.Kind][]Injection{},
		c: counters{sent: map[string]int{}, acked: map[string]int{}, lost: map[string]int{},
			refundSent: map[string]int{}, refundAcked: map[string]int{}, queries: map[string]int{},
			refundQueries: map[string]int{}, refundCalls: map[string]int{}, closes: map[string]int{}}}
	for k, u := range opts.NotifyURL {
		s.notify[k] = u
	}
	if s.wx, err = newWXServer(s, keys[0], keys[1]); err != nil {
		cancel()
		return nil, err
	}
	s.ap = newAPServer(s, keys[2], keys[3])
	s.st = newSTServer(s)
	for _, srv := range []*server{&s.wx.server, &s.ap.server, &s.st.server} {
		if err := s.listen(srv); err != nil {
			s.Close()
			return nil, err
		}
	}
	go func() { <-cctx.Done(); s.shutdown() }()
	return s, nil
}

// server is one channel's HTTP endpoint.
type server struct {
	srv  *http.Server
	base string
}

func (s *Sim) listen(srv *server) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("paysim: listening: %w", err)
	}
	srv.base = "http://" + ln.Addr().String()
	srv.srv.BaseContext = func(net.Listener) context.Context { return s.ctx }
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = srv.srv.Serve(ln)
	}()
	return nil
}

func (s *Sim) shutdown() {
	for _, srv := range []*server{&s.wx.server, &s.ap.server, &s.st.server} {
		if srv.srv != nil {
			_ = srv.srv.Close()
		}
	}
}

// Close stops the servers and the callback senders and waits for them.
func (s *Sim) Close() error {
	s.cancel()
	s.shutdown()
	s.wg.Wait()
	return nil
}

// URL is the base URL of a channel's server.
func (s *Sim) URL(kind channel.Kind) string {
	switch kind {
	case channel.KindWeChat:
		return s.wx.base
	case channel.KindAlipay:
		return s.ap.base
	case channel.KindStripe:
		return s.st.base
	}
	return ""
}

func (s *Sim) merchant(kind channel.Kind) Merchant {
	if m, ok := s.opts.Merchants[kind]; ok {
		return m
	}
	switch kind {
	case channel.KindWeChat:
		return Merchant{MerchantID: "1900000109", AppID: "wxd678efh567hg6787"}
	case channel.KindStripe:
		return Merchant{MerchantID: s.st.account}
	}
	return Merchant{MerchantID: "2088102146225135", AppID: "2021000116697718"}
}

// Config is what Keel needs to talk to this simulator's channel.
func (s *Sim) Config(kind channel.Kind) channel.Config {
	m := s.merchant(kind)
	cfg := channel.Config{Kind: kind, BaseURL: s.URL(kind), MerchantID: m.MerchantID, AppID: m.AppID,
		HTTPTimeout: s.opts.ClientTimeout}
	switch kind {
	case channel.KindWeChat:
		cfg.MerchantKeyPEM = privatePEM(s.wx.merchantKey)
		cfg.MerchantSerial = s.wx.merchantSerial
		cfg.APIv3Key = s.wx.apiV3Key
		cfg.PublicKeyPEM = s.wx.currentCert().pem
	case channel.KindAlipay:
		cfg.BaseURL += apGatewayPath
		cfg.MerchantKeyPEM = privatePEM(s.ap.appKey)
		s.mu.Lock()
		cfg.PublicKeyPEM = publicPEM(&s.ap.platformKey.PublicKey)
		s.mu.Unlock()
	case channel.KindStripe:
		cfg.APIKey = s.st.apiKey
		s.mu.Lock()
		cfg.WebhookSecrets = append([]string(nil), s.st.secrets...)
		s.mu.Unlock()
	}
	return cfg
}

// RotateKey gives the channel a new platform key. WeChat: a new certificate
// with a new serial signs from now on; /v3/certificates lists old and new.
// Alipay: a new gateway key signs from now on; Config carries its public
// key (the gateway has no serials: Keel must be reconfigured). Stripe: a
// new webhook secret; webhooks carry signatures under the old and the new
// one while the roll lasts, and Config lists both. It returns the new
// WeChat serial ("" for the others). RotateKey generates an RSA key, which
// takes a moment.
func (s *Sim) RotateKey(kind channel.Kind) (string, error) {
	k, err := NewKey()
	if err != nil {
		return "", err
	}
	switch kind {
	case channel.KindWeChat:
		c, err := newPlatformCert(k, s.now())
		if err != nil {
			return "", err
		}
		s.mu.Lock()
		s.wx.certs = append(s.wx.certs, c)
		s.mu.Unlock()
		return c.serial, nil
	case channel.KindAlipay:
		s.mu.Lock()
		s.ap.platformKey = k
		s.mu.Unlock()
		return "", nil
	case channel.KindStripe:
		s.mu.Lock()
		s.st.secrets = append(s.st.secrets, "whsec_"+randomString(32))
		s.mu.Unlock()
		return "", nil
	}
	return "", fmt.Errorf("paysim: unknown channel %q", kind)
}

// PlatformSerial is the serial of the WeChat certificate signing now.
func (s *Sim) PlatformSerial() string { return s.wx.currentCert().serial }

// PlatformKey is the key the channel signs with now (for tests that forge).
func (s *Sim) PlatformKey(kind channel.Kind) *rsa.PrivateKey {
	if kind == channel.KindWeChat {
		return s.wx.currentCert().key
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ap.platformKey
}

// Duplicate makes the next callback (of any channel) arrive as n concurrent
// copies of its first attempt.
func (s *Sim) Duplicate(n int) {
	s.mu.Lock()
	s.dupNext = n
	s.mu.Unlock()
}

// Reorder holds the next callback back until the one after it has been
// sent (or, if none follows, until its first retry would be due, and at
// least ten seconds).
func (s *Sim) Reorder() {
	s.mu.Lock()
	s.reorderNext = true
	s.mu.Unlock()
}

// LoseNext drops the next callback attempt in the network: Keel never sees
// it and the channel retries on schedule.
func (s *Sim) LoseNext() {
	s.mu.Lock()
	s.loseNext++
	s.mu.Unlock()
}

// RefundBehaviour sets how the channel treats a refund number.
func (s *Sim) RefundBehaviour(outRefundNo string, b Behaviour) {
	s.mu.Lock()
	s.behaviour[outRefundNo] = b
	delete(s.used, outRefundNo)
	s.mu.Unlock()
}

func count(m map[string]int, mu *sync.Mutex, k string) int {
	mu.Lock()
	defer mu.Unlock()
	return m[k]
}

// CallbacksSent is how many payment callback requests for the trade reached
// Keel's notify URL (duplicates included, lost ones not).
func (s *Sim) CallbacksSent(outTradeNo string) int { return count(s.c.sent, &s.mu, outTradeNo) }

// Acks is how many of those Keel answered with the channel's success reply.
func (s *Sim) Acks(outTradeNo string) int { return count(s.c.acked, &s.mu, outTradeNo) }

// Lost is how many payment callback attempts for the trade were dropped.
func (s *Sim) Lost(outTradeNo string) int { return count(s.c.lost, &s.mu, outTradeNo) }

// RefundCallbacksSent counts refund callback requests that reached Keel.
func (s *Sim) RefundCallbacksSent(outRefundNo string) int {
	return count(s.c.refundSent, &s.mu, outRefundNo)
}

// RefundAcks counts refund callbacks Keel acknowledged.
func (s *Sim) RefundAcks(outRefundNo string) int { return count(s.c.refundAcked, &s.mu, outRefundNo) }

// Queries is how many payment queries for the trade the channel answered.
// Stripe's client finds the PaymentIntent by a search before every call,
// so for Stripe every call about the trade counts.
func (s *Sim) Queries(outTradeNo string) int { return count(s.c.queries, &s.mu, outTradeNo) }

// RefundQueries is how many refund queries for the refund number arrived.
func (s *Sim) RefundQueries(outRefundNo string) int {
	return count(s.c.refundQueries, &s.mu, outRefundNo)
}

// RefundCalls is how many refund requests with this number arrived
// (whatever was answered).
func (s *Sim) RefundCalls(outRefundNo string) int { return count(s.c.refundCalls, &s.mu, outRefundNo) }

// Closes is how many close requests for the trade arrived.
func (s *Sim) Closes(outTradeNo string) int { return count(s.c.closes, &s.mu, outTradeNo) }

// CertFetches is how many times the WeChat certificates endpoint was called.
func (s *Sim) CertFetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.certFetches
}

// RejectedRequests is how many requests the channels refused because their
// signature, merchant or app did not verify.
func (s *Sim) RejectedRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.rejected
}

// GaveUp is how many callbacks exhausted the retry schedule unacknowledged.
func (s *Sim) GaveUp() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.gave
}

var errUnknownKind = errors.New("paysim: unknown channel")

func (s *Sim) id(prefix string) string {
	return fmt.Sprintf("%s%s%s%010d", prefix, s.now().In(chinaTime).Format("20060102"), s.run, s.seq.Add(1))
}
