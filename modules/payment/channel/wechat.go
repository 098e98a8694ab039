package channel

// WeChat Pay API v3, written against the published specification with the
// Go standard library: the official SDK (github.com/wechatpay-apiv3/wechatpay-go)
// is not reachable from the module proxy this project builds with. The wire
// format lives in package wechatpay, shared with the simulator.

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/keelwork/keel/modules/payment/channel/wechatpay"
)

func init() { builders[KindWeChat] = newWeChat }

// Paths of the v3 API.
const (
	wxPathCertificates = "/v3/certificates"
	wxPathTradeByOut   = "/v3/pay/transactions/out-trade-no/"
	wxPathRefunds      = "/v3/refund/domestic/refunds"
	wxPathTradeBill    = "/v3/bill/tradebill"
)

// failedSerialTTL is how long a serial that a refresh did not find is
// refused without asking the channel again, and maxFailedSerials bounds
// that memory: forged serials must not turn every bad callback into a call
// to the channel.
const (
	failedSerialTTL  = 10 * time.Minute
	maxFailedSerials = 1024
)

type weChat struct {
	cfg    Config
	key    *rsa.PrivateKey
	client *http.Client

	refreshMu sync.Mutex // one certificate download at a time
	mu        sync.RWMutex
	platform  map[string]*rsa.PublicKey
	failed    map[string]time.Time
}

func newWeChat(ctx context.Context, cfg Config) (*Channel, error) {
	switch {
	case cfg.BaseURL == "":
		return nil, errors.New("channel: wechat: BaseURL is required")
	case cfg.MerchantID == "":
		return nil, errors.New("channel: wechat: MerchantID (mchid) is required")
	case cfg.MerchantSerial == "":
		return nil, errors.New("channel: wechat: MerchantSerial is required")
	case len(cfg.APIv3Key) != 32:
		return nil, fmt.Errorf("channel: wechat: APIv3Key must be 32 bytes, got %d", len(cfg.APIv3Key))
	}
	key, err := wechatpay.ParsePrivateKey(cfg.MerchantKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("channel: wechat: MerchantKeyPEM: %w", err)
	}
	w := &weChat{cfg: cfg, key: key, client: newHTTPClient(cfg),
		platform: map[string]*rsa.PublicKey{}, failed: map[string]time.Time{}}
	// PublicKeyPEM, when given, holds platform certificates to start with;
	// otherwise the set is downloaded now, or on the first callback if the
	// channel cannot be reached yet (a channel being down is not a reason
	// for Keel not to start).
	if len(bytes.TrimSpace(cfg.PublicKeyPEM)) > 0 {
		if err := w.seed(cfg.PublicKeyPEM); err != nil {
			return nil, fmt.Errorf("channel: wechat: PublicKeyPEM: %w", err)
		}
	} else {
		_ = w.refresh(ctx)
	}
	return &Channel{Kind: KindWeChat, Verifier: w, Client: w}, nil
}

func (w *weChat) seed(pemBytes []byte) error {
	rest := pemBytes
	for len(bytes.TrimSpace(rest)) > 0 {
		end := bytes.Index(rest, []byte("-----END CERTIFICATE-----"))
		if end < 0 {
			return errors.New("not a certificate PEM")
		}
		end += len("-----END CERTIFICATE-----")
		pub, serial, _, err := wechatpay.ParseCertificate(rest[:end])
		if err != nil {
			return err
		}
		w.platform[serial] = pub
		rest = rest[end:]
	}
	return nil
}

func (w *weChat) platformKey(serial string) *rsa.PublicKey {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.platform[serial]
}

// keyFor returns the platform key for serial, downloading the certificate
// set once when the serial is unknown (the channel rotated its key).
func (w *weChat) keyFor(ctx context.Context, serial string) (*rsa.PublicKey, error) {
	if k := w.platformKey(serial); k != nil {
		return k, nil
	}
	w.refreshMu.Lock()
	defer w.refreshMu.Unlock()
	if k := w.platformKey(serial); k != nil { // another caller refreshed meanwhile
		return k, nil
	}
	now := w.cfg.Now()
	w.mu.Lock()
	at, seen := w.failed[serial]
	full := len(w.failed) >= maxFailedSerials
	w.mu.Unlock()
	if seen && now.Sub(at) < failedSerialTTL {
		return nil, fmt.Errorf("%w: %q (already refreshed)", ErrUnknownSerial, serial)
	}
	if full {
		return nil, fmt.Errorf("%w: %q (too many unknown serials to refresh for)", ErrUnknownSerial, serial)
	}
	if err := w.refresh(ctx); err != nil {
		return nil, fmt.Errorf("%w: %q: refreshing platform certificates: %w", ErrUnknownSerial, serial, err)
	}
	if k := w.platformKey(serial); k != nil {
		return k, nil
	}
	w.mu.Lock()
	for s, t := range w.failed {
		if now.Sub(t) >= failedSerialTTL {
			delete(w.failed, s)
		}
	}
	w.failed[serial] = now
	w.mu.Unlock()
	return nil, fmt.Errorf("%w: %q", ErrUnknownSerial, serial)
}

// refresh downloads /v3/certificates, decrypts each certificate with the
// APIv3 key, and checks the answer's own signature with one of them before
// replacing the set.
func (w *weChat) refresh(ctx context.Context) error {
	status, h, body, err := w.send(ctx, http.MethodGet, wxPathCertificates, nil, nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return statusError("downloading platform certificates", status, string(body))
	}
	var certs wechatpay.Certificates
	if err := json.Unmarshal(body, &certs); err != nil {
		return fmt.Errorf("platform certificates: %w", err)
	}
	fresh := map[string]*rsa.PublicKey{}
	for _, c := range certs.Data {
		r := c.EncryptCertificate
		pemBytes, err := wechatpay.Decrypt(w.cfg.APIv3Key, r.Nonce, r.AssociatedData, r.Ciphertext)
		if err != nil {
			return fmt.Errorf("platform certificate %s: %w", c.SerialNo, err)
		}
		pub, serial, _, err := wechatpay.ParseCertificate(pemBytes)
		if err != nil {
			return err
		}
		fresh[serial] = pub
	}
	k := fresh[h.Get(wechatpay.HeaderSerial)]
	if k == nil {
		return fmt.Errorf("platform certificates answer is signed by %q, which it does not contain", h.Get(wechatpay.HeaderSerial))
	}
	if err := w.checkSigned(h, body, k); err != nil {
		return fmt.Errorf("platform certificates answer: %w", err)
	}
	w.mu.Lock()
	w.platform = fresh
	w.mu.Unlock()
	return nil
}

// checkSigned verifies the platform signature headers over body.
func (w *weChat) checkSigned(h http.Header, body []byte, k *rsa.PublicKey) error {
	ts, nonce, sig := h.Get(wechatpay.HeaderTimestamp), h.Get(wechatpay.HeaderNonce), h.Get(wechatpay.HeaderSignature)
	if _, ok := wechatpay.CheckTimestamp(ts, w.cfg.Now()); !ok {
		return fmt.Errorf("%w: Wechatpay-Timestamp %q", ErrSkew, ts)
	}
	if err := wechatpay.Verify(k, wechatpay.NotifyMessage(ts, nonce, body), sig); err != nil {
		return fmt.Errorf("%w: %v", ErrSignature, err)
	}
	return nil
}

// Verify authenticates a notification: the four Wechatpay-* headers, a
// timestamp within five minutes, the platform signature over
// "timestamp\nnonce\nbody\n" with the key named by the serial, then the
// AEAD_AES_256_GCM resource opened with the APIv3 key.
func (w *weChat) Verify(ctx context.Context, h http.Header, body []byte) (*Notice, error) {
	if len(body) == 0 || len(body) > maxNotification {
		return nil, fmt.Errorf("%w: body of %d bytes", ErrMalformed, len(body))
	}
	ts, nonce := h.Get(wechatpay.HeaderTimestamp), h.Get(wechatpay.HeaderNonce)
	sig, serial := h.Get(wechatpay.HeaderSignature), h.Get(wechatpay.HeaderSerial)
	if ts == "" || nonce == "" || sig == "" || serial == "" {
		return nil, fmt.Errorf("%w: a Wechatpay-Timestamp/Nonce/Signature/Serial header is missing", ErrMalformed)
	}
	if _, ok := wechatpay.CheckTimestamp(ts, w.cfg.Now()); !ok {
		return nil, fmt.Errorf("%w: Wechatpay-Timestamp %q", ErrSkew, ts)
	}
	k, err := w.keyFor(ctx, serial)
	if err != nil {
		return nil, err
	}
	if err := wechatpay.Verify(k, wechatpay.NotifyMessage(ts, nonce, body), sig); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSignature, err)
	}
	return w.open(body)
}

// open decrypts and maps a verified notification body.
func (w *weChat) open(body []byte) (*Notice, error) {
	var env wechatpay.Notification
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if env.Resource.Algorithm != wechatpay.AlgorithmAEAD {
		return nil, fmt.Errorf("%w: resource algorithm %q", ErrMalformed, env.Resource.Algorithm)
	}
	r := env.Resource
	plain, err := wechatpay.Decrypt(w.cfg.APIv3Key, r.Nonce, r.AssociatedData, r.Ciphertext)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecrypt, err)
	}
	var n *Notice
	switch {
	case strings.HasPrefix(env.EventType, "TRANSACTION."):
		var t wechatpay.Transaction
		if err := json.Unmarshal(plain, &t); err != nil {
			return nil, fmt.Errorf("%w: transaction resource: %v", ErrMalformed, err)
		}
		if n, err = wxTransactionNotice(&t); err != nil {
			return nil, err
		}
	case strings.HasPrefix(env.EventType, "REFUND."):
		var rf wechatpay.RefundNotice
		if err := json.Unmarshal(plain, &rf); err != nil {
			return nil, fmt.Errorf("%w: refund resource: %v", ErrMalformed, err)
		}
		if n, err = wxRefundNotice(&rf); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: event_type %q", ErrMalformed, env.EventType)
	}
	n.NotifyID = env.ID
	return n, nil
}

func wxTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: time %q", ErrMalformed, s)
	}
	return t.UTC(), nil
}

func wxTradeState(s string) (State, error) {
	switch s {
	case "SUCCESS", "REFUND": // REFUND: paid, and refunds exist
		return StatePaid, nil
	case "NOTPAY", "USERPAYING", "PAYERROR":
		return StateNotPaid, nil
	case "CLOSED", "REVOKED":
		return StateClosed, nil
	}
	return "", fmt.Errorf("%w: trade_state %q", ErrMalformed, s)
}

func wxRefundState(s string) (State, error) {
	switch s {
	case "SUCCESS":
		return StateRefunded, nil
	case "PROCESSING":
		return StateRefunding, nil
	case "ABNORMAL", "CLOSED":
		return StateRefundFail, nil
	}
	return "", fmt.Errorf("%w: refund status %q", ErrMalformed, s)
}

func wxTransactionNotice(t *wechatpay.Transaction) (*Notice, error) {
	st, err := wxTradeState(t.TradeState)
	if err != nil {
		return nil, err
	}
	at, err := wxTime(t.SuccessTime)
	if err != nil {
		return nil, err
	}
	if t.OutTradeNo == "" {
		return nil, fmt.Errorf("%w: no out_trade_no", ErrMalformed)
	}
	n := &Notice{Channel: KindWeChat, Event: EventPayment, MerchantID: t.MchID, AppID: t.AppID,
		OutTradeNo: t.OutTradeNo, TransactionID: t.TransactionID, State: st, At: at}
	if t.Amount != nil {
		if t.Amount.Total < 0 {
			return nil, fmt.Errorf("%w: negative amount", ErrMalformed)
		}
		n.AmountMinor, n.Currency = t.Amount.Total, t.Amount.Currency
	}
	if st == StatePaid && (t.Amount == nil || t.TransactionID == "") {
		return nil, fmt.Errorf("%w: a paid transaction without amount or transaction_id", ErrMalformed)
	}
	return n, nil
}

func wxRefundNotice(r *wechatpay.RefundNotice) (*Notice, error) {
	st, err := wxRefundState(r.RefundStatus)
	if err != nil {
		return nil, err
	}
	at, err := wxTime(r.SuccessTime)
	if err != nil {
		return nil, err
	}
	if r.OutTradeNo == "" || r.OutRefundNo == "" || r.Amount.Refund < 0 {
		return nil, fmt.Errorf("%w: refund without out_trade_no, out_refund_no or with a negative amount", ErrMalformed)
	}
	// The refund notification carries no currency; domestic refunds are in
	// the trade's currency, which for this API is CNY.
	return &Notice{Channel: KindWeChat, Event: EventRefund, MerchantID: r.MchID, OutTradeNo: r.OutTradeNo,
		TransactionID: r.TransactionID, OutRefundNo: r.OutRefundNo, RefundID: r.RefundID,
		AmountMinor: r.Amount.Refund, Currency: "CNY", State: st, At: at}, nil
}

func wxRefundAnswer(r *wechatpay.Refund) (*Notice, error) {
	st, err := wxRefundState(r.Status)
	if err != nil {
		return nil, err
	}
	at, err := wxTime(r.SuccessTime)
	if err != nil {
		return nil, err
	}
	cur := r.Amount.Currency
	if cur == "" {
		cur = "CNY"
	}
	return &Notice{Channel: KindWeChat, Event: EventRefund, OutTradeNo: r.OutTradeNo,
		TransactionID: r.TransactionID, OutRefundNo: r.OutRefundNo, RefundID: r.RefundID,
		AmountMinor: r.Amount.Refund, Currency: cur, State: st, At: at}, nil
}

// Ack answers 204 with no body, which the specification accepts as success.
func (w *weChat) Ack(rw http.ResponseWriter) { rw.WriteHeader(http.StatusNoContent) }

// Fail answers with a 4xx/5xx and {"code":"FAIL","message":…}; the channel
// then retries on its schedule.
func (w *weChat) Fail(rw http.ResponseWriter, status int, message string) {
	if status < 400 {
		status = http.StatusInternalServerError
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	_ = json.NewEncoder(rw).Encode(wechatpay.Error{Code: "FAIL", Message: message})
}

// send signs and performs one request and returns the raw answer; it does
// not verify the answer's signature (call does).
func (w *weChat) send(ctx context.Context, method, path string, query url.Values, body []byte) (int, http.Header, []byte, error) {
	u, err := url.Parse(strings.TrimRight(w.cfg.BaseURL, "/") + path)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("wechat %s: %w", path, err)
	}
	if query != nil {
		u.RawQuery = query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	if err := w.authorize(req, body); err != nil {
		return 0, nil, nil, err
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, nil, nil, transportError("wechat "+method+" "+u.Path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return 0, nil, nil, transportError("wechat "+method+" "+u.Path+": reading answer", err)
	}
	return resp.StatusCode, resp.Header, raw, nil
}

// authorize adds the merchant's WECHATPAY2-SHA256-RSA2048 Authorization.
func (w *weChat) authorize(req *http.Request, body []byte) error {
	ts := strconv.FormatInt(w.cfg.Now().Unix(), 10)
	nonce := wechatpay.Nonce()
	sig, err := wechatpay.Sign(w.key, wechatpay.RequestMessage(req.Method, req.URL.RequestURI(), ts, nonce, body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", wechatpay.Auth{MchID: w.cfg.MerchantID, NonceStr: nonce,
		Signature: sig, Timestamp: ts, SerialNo: w.cfg.MerchantSerial}.String())
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return nil
}

// call performs a request, verifies the answer's platform signature and
// classifies the result; out receives a 2xx JSON body.
func (w *weChat) call(ctx context.Context, op, method, path string, query url.Values, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	status, h, raw, err := w.send(ctx, method, path, query, body)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	signed := h.Get(wechatpay.HeaderSignature) != ""
	if signed {
		k, err := w.keyFor(ctx, h.Get(wechatpay.HeaderSerial))
		if err == nil {
			err = w.checkSigned(h, raw, k)
		}
		if err != nil {
			// An answer that does not verify cannot be believed either way.
			return fmt.Errorf("%s: %w: answer: %w", op, ErrUnknownOutcome, err)
		}
	}
	if status >= 200 && status < 300 {
		if !signed {
			return fmt.Errorf("%s: %w: %w: HTTP %d answer is not signed", op, ErrUnknownOutcome, ErrSignature, status)
		}
		if out != nil {
			if err := json.Unmarshal(raw, out); err != nil {
				return fmt.Errorf("%s: %w: answer: %v", op, ErrUnknownOutcome, err)
			}
		}
		return nil
	}
	var e wechatpay.Error
	_ = json.Unmarshal(raw, &e)
	detail := strings.TrimSpace(e.Code + " " + e.Message)
	if !signed {
		// An error nobody signed may come from anything in between (a proxy,
		// a load balancer): it proves nothing about the channel's state.
		return fmt.Errorf("%s: %w: unsigned HTTP %d %s", op, ErrUnknownOutcome, status, detail)
	}
	switch e.Code {
	case wechatpay.CodeOrderNotExist, wechatpay.CodeResourceNotExists:
		return fmt.Errorf("%s: %w: %s", op, ErrNotFound, detail)
	case wechatpay.CodeSystemError:
		return fmt.Errorf("%s: %w: %s", op, ErrUnknownOutcome, detail)
	}
	return statusError(op, status, detail)
}

func (w *weChat) QueryPayment(ctx context.Context, outTradeNo string) (*Notice, error) {
	var t wechatpay.Transaction
	q := url.Values{"mchid": {w.cfg.MerchantID}}
	if err := w.call(ctx, "wechat query "+outTradeNo, http.MethodGet, wxPathTradeByOut+url.PathEscape(outTradeNo), q, nil, &t); err != nil {
		return nil, err
	}
	n, err := wxTransactionNotice(&t)
	if err != nil {
		return nil, fmt.Errorf("wechat query %s: %w", outTradeNo, err)
	}
	if n.OutTradeNo != outTradeNo {
		return nil, fmt.Errorf("wechat query %s: %w: answer is about %q", outTradeNo, ErrMalformed, n.OutTradeNo)
	}
	return n, nil
}

func (w *weChat) ClosePayment(ctx context.Context, outTradeNo string) error {
	return w.call(ctx, "wechat close "+outTradeNo, http.MethodPost,
		wxPathTradeByOut+url.PathEscape(outTradeNo)+"/close", nil, wechatpay.Close{MchID: w.cfg.MerchantID}, nil)
}

func (w *weChat) Refund(ctx context.Context, r RefundRequest) (*Notice, error) {
	op := "wechat refund " + r.OutRefundNo
	if r.AmountMinor <= 0 || r.TotalMinor <= 0 || r.AmountMinor > r.TotalMinor {
		return nil, fmt.Errorf("%s: %w: amount %d of total %d", op, ErrRejected, r.AmountMinor, r.TotalMinor)
	}
	in := wechatpay.RefundCreate{OutTradeNo: r.OutTradeNo, OutRefundNo: r.OutRefundNo, Reason: r.Reason,
		Amount: wechatpay.RefundAmount{Refund: r.AmountMinor, Total: r.TotalMinor, Currency: r.Currency}}
	var out wechatpay.Refund
	if err := w.call(ctx, op, http.MethodPost, wxPathRefunds, nil, in, &out); err != nil {
		return nil, err
	}
	n, err := wxRefundAnswer(&out)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if n.OutRefundNo != r.OutRefundNo {
		return nil, fmt.Errorf("%s: %w: answer is about %q", op, ErrUnknownOutcome, n.OutRefundNo)
	}
	n.MerchantID = w.cfg.MerchantID
	return n, nil
}

func (w *weChat) QueryRefund(ctx context.Context, outTradeNo, outRefundNo string) (*Notice, error) {
	op := "wechat refund query " + outRefundNo
	var out wechatpay.Refund
	if err := w.call(ctx, op, http.MethodGet, wxPathRefunds+"/"+url.PathEscape(outRefundNo), nil, nil, &out); err != nil {
		return nil, err
	}
	n, err := wxRefundAnswer(&out)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if n.OutRefundNo != outRefundNo || (outTradeNo != "" && n.OutTradeNo != outTradeNo) {
		return nil, fmt.Errorf("%s: %w: answer is about %s/%s", op, ErrMalformed, n.OutTradeNo, n.OutRefundNo)
	}
	n.MerchantID = w.cfg.MerchantID
	return n, nil
}

// Bill downloads the trade bill (type ALL) of the channel's day (China
// time, UTC+8) that contains the instant day. The file is checked against
// the SHA1 the bill call announced.
func (w *weChat) Bill(ctx context.Context, day time.Time) ([]BillLine, error) {
	date := day.In(wechatpay.ChinaTime).Format("2006-01-02")
	op := "wechat bill " + date
	var bu wechatpay.BillURL
	err := w.call(ctx, op, http.MethodGet, wxPathTradeBill, url.Values{"bill_date": {date}, "bill_type": {"ALL"}}, nil, &bu)
	if err != nil {
		if strings.Contains(err.Error(), "NO_STATEMENT_EXIST") && errors.Is(err, ErrRejected) {
			return nil, nil // the day had no trades
		}
		return nil, err
	}
	du, err := url.Parse(bu.DownloadURL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: download_url: %v", op, ErrMalformed, err)
	}
	base, _ := url.Parse(w.cfg.BaseURL)
	if base == nil || du.Host != base.Host {
		return nil, fmt.Errorf("%s: %w: download_url host %q is not the API's", op, ErrMalformed, du.Host)
	}
	// The file itself is not signed; its integrity is the announced hash.
	status, _, raw, err := w.send(ctx, http.MethodGet, du.Path, du.Query(), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if status != http.StatusOK {
		return nil, statusError(op+": download", status, "")
	}
	sum := sha1.Sum(raw)
	if !strings.EqualFold(bu.HashType, "SHA1") || !strings.EqualFold(hex.EncodeToString(sum[:]), bu.HashValue) {
		return nil, fmt.Errorf("%s: %w: file does not match its %s hash", op, ErrMalformed, bu.HashType)
	}
	rows, err := wechatpay.ParseBill(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", op, ErrMalformed, err)
	}
	return wxBillLines(date, rows)
}

func wxBillLines(date string, rows []wechatpay.BillRow) ([]BillLine, error) {
	out := make([]BillLine, 0, len(rows))
	for _, r := range rows {
		at, err := time.ParseInLocation("2006-01-02 15:04:05", r.TradeTime, wechatpay.ChinaTime)
		if err != nil {
			return nil, fmt.Errorf("%w: bill 交易时间 %q", ErrMalformed, r.TradeTime)
		}
		l := BillLine{Day: date, MerchantID: r.MchID, OutTradeNo: r.OutTradeNo, TransactionID: r.TransactionID,
			FeeMinor: r.Fee, Currency: r.Currency, At: at.UTC()}
		if r.TradeState == "REFUND" {
			l.Event, l.OutRefundNo, l.RefundID, l.AmountMinor = EventRefund, r.OutRefundNo, r.RefundID, r.RefundAmount
			switch r.RefundStatus {
			case "SUCCESS":
				l.State = StateRefunded
			case "PROCESSING":
				l.State = StateRefunding
			default:
				l.State = StateRefundFail
			}
		} else {
			l.Event, l.AmountMinor = EventPayment, r.SettlementTotal
			if l.State, err = wxTradeState(r.TradeState); err != nil {
				return nil, err
			}
		}
		out = append(out, l)
	}
	return out, nil
}
