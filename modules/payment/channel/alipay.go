package channel

// Alipay open platform gateway, written against the published
// specification with the Go standard library (Alipay's SDK is not reachable
// from the module proxy this project builds with). The wire format lives in
// package alipay, shared with the simulator.

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/keelwork/keel/modules/payment/channel/alipay"
)

func init() { builders[KindAlipay] = newAlipay }

// Gateway methods this client calls.
const (
	apMethodQuery       = "alipay.trade.query"
	apMethodClose       = "alipay.trade.close"
	apMethodRefund      = "alipay.trade.refund"
	apMethodRefundQuery = "alipay.trade.fastpay.refund.query"
	apMethodBillURL     = "alipay.data.dataservice.bill.downloadurl.query"
)

type aliPay struct {
	cfg    Config
	key    *rsa.PrivateKey
	pub    *rsa.PublicKey
	client *http.Client
}

func newAlipay(_ context.Context, cfg Config) (*Channel, error) {
	switch {
	case cfg.BaseURL == "":
		return nil, errors.New("channel: alipay: BaseURL (the gateway URL) is required")
	case cfg.AppID == "":
		return nil, errors.New("channel: alipay: AppID is required")
	case cfg.MerchantID == "":
		return nil, errors.New("channel: alipay: MerchantID (the seller's 2088 PID) is required")
	}
	key, err := alipay.ParsePrivateKey(cfg.MerchantKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("channel: alipay: MerchantKeyPEM (app private key): %w", err)
	}
	pub, err := alipay.ParsePublicKey(cfg.PublicKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("channel: alipay: PublicKeyPEM (Alipay public key): %w", err)
	}
	a := &aliPay{cfg: cfg, key: key, pub: pub, client: newHTTPClient(cfg)}
	return &Channel{Kind: KindAlipay, Verifier: a, Client: a}, nil
}

// Verify authenticates an asynchronous notify: the form body decoded, every
// parameter but sign and sign_type sorted into k=v&…, and the RSA2 sign
// checked with Alipay's public key. app_id and seller_id are returned in
// the Notice (AppID, MerchantID) for the caller to compare with its own.
func (a *aliPay) Verify(_ context.Context, _ http.Header, body []byte) (*Notice, error) {
	if len(body) == 0 || len(body) > maxNotification {
		return nil, fmt.Errorf("%w: body of %d bytes", ErrMalformed, len(body))
	}
	p, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("%w: form: %v", ErrMalformed, err)
	}
	for k, v := range p {
		// A repeated name would let the signed value and the used value differ.
		if len(v) != 1 {
			return nil, fmt.Errorf("%w: parameter %q appears %d times", ErrMalformed, k, len(v))
		}
		if !utf8.ValidString(k) || !utf8.ValidString(v[0]) {
			return nil, fmt.Errorf("%w: parameter %q is not UTF-8", ErrMalformed, k)
		}
	}
	if st := p.Get("sign_type"); st != "RSA2" {
		return nil, fmt.Errorf("%w: sign_type %q, only RSA2 is accepted", ErrSignature, st)
	}
	if err := alipay.Verify(a.pub, []byte(alipay.SignContent(p, "sign", "sign_type")), p.Get("sign")); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSignature, err)
	}
	return apNotice(p)
}

// apNotice maps a verified trade_status_sync notify. A refund shows as
// out_biz_no (our out_request_no) with gmt_refund; its refund_fee is the
// trade's cumulative refund, not this refund's amount, so AmountMinor is
// left 0 and RefundedTotalMinor carries it: confirm the single refund with
// QueryRefund.
func apNotice(p url.Values) (*Notice, error) {
	n := &Notice{Channel: KindAlipay, NotifyID: p.Get("notify_id"), MerchantID: p.Get("seller_id"),
		AppID: p.Get("app_id"), OutTradeNo: p.Get("out_trade_no"), TransactionID: p.Get("trade_no"), Currency: "CNY"}
	if n.OutTradeNo == "" || n.TransactionID == "" {
		return nil, fmt.Errorf("%w: no out_trade_no or trade_no", ErrMalformed)
	}
	if c := p.Get("trans_currency"); c != "" {
		n.Currency = c
	}
	total, err := apAmount(p.Get("total_amount"))
	if err != nil {
		return nil, err
	}
	if p.Get("out_biz_no") != "" && p.Get("gmt_refund") != "" {
		n.Event, n.OutRefundNo, n.State = EventRefund, p.Get("out_biz_no"), StateRefunded
		if n.RefundedTotalMinor, err = apAmount(p.Get("refund_fee")); err != nil {
			return nil, err
		}
		n.At, err = apTime(p.Get("gmt_refund"))
		return n, err
	}
	n.Event, n.AmountMinor = EventPayment, total
	if n.State, err = apTradeState(p.Get("trade_status")); err != nil {
		return nil, err
	}
	if n.State == StatePaid {
		n.At, err = apTime(p.Get("gmt_payment"))
	}
	return n, err
}

func apAmount(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	v, err := alipay.ParseYuan(s)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%w: amount %q", ErrMalformed, s)
	}
	return v, nil
}

func apTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := alipay.ParseTime(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return t, nil
}

func apTradeState(s string) (State, error) {
	switch s {
	case "TRADE_SUCCESS", "TRADE_FINISHED":
		return StatePaid, nil
	case "WAIT_BUYER_PAY":
		return StateNotPaid, nil
	case "TRADE_CLOSED":
		return StateClosed, nil
	}
	return "", fmt.Errorf("%w: trade_status %q", ErrMalformed, s)
}

// Ack writes the literal "success" the gateway waits for.
func (a *aliPay) Ack(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, alipay.ReplySuccess)
}

// Fail writes the literal "fail"; anything but "success" makes the gateway
// retry on its schedule. The message stays in Keel's own audit.
func (a *aliPay) Fail(w http.ResponseWriter, status int, _ string) {
	if status < 400 {
		status = http.StatusBadRequest
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, alipay.ReplyFail)
}

// call sends one gateway request signed with the app key and verifies the
// response node's sign with Alipay's public key before believing it.
func (a *aliPay) call(ctx context.Context, op, method string, biz any, out any) error {
	bc, err := json.Marshal(biz)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	p := url.Values{
		"app_id": {a.cfg.AppID}, "method": {method}, "format": {"JSON"}, "charset": {"utf-8"},
		"sign_type": {"RSA2"}, "timestamp": {alipay.FormatTime(a.cfg.Now())}, "version": {"1.0"},
		"biz_content": {string(bc)},
	}
	sig, err := alipay.Sign(a.key, []byte(alipay.SignContent(p, "sign")))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	p.Set("sign", sig)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.BaseURL, strings.NewReader(p.Encode()))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded;charset=utf-8")
	resp, err := a.client.Do(req)
	if err != nil {
		return transportError(op, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return transportError(op+": reading answer", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %w: HTTP %d", op, ErrUnknownOutcome, resp.StatusCode)
	}
	node, sign, err := alipay.SplitResponse(raw, method)
	if err != nil {
		return fmt.Errorf("%s: %w: %v", op, ErrUnknownOutcome, err)
	}
	if err := alipay.Verify(a.pub, node, sign); err != nil {
		// An answer that does not verify cannot be believed either way.
		return fmt.Errorf("%s: %w: %w: answer: %v", op, ErrUnknownOutcome, ErrSignature, err)
	}
	var c alipay.Common
	if err := json.Unmarshal(node, &c); err != nil {
		return fmt.Errorf("%s: %w: answer: %v", op, ErrUnknownOutcome, err)
	}
	if err := apClassify(op, c); err != nil {
		return err
	}
	if err := json.Unmarshal(node, out); err != nil {
		return fmt.Errorf("%s: %w: answer: %v", op, ErrUnknownOutcome, err)
	}
	return nil
}

func apClassify(op string, c alipay.Common) error {
	detail := strings.TrimSpace(c.Code + " " + c.Msg + " " + c.SubCode + " " + c.SubMsg)
	switch {
	case c.Code == alipay.CodeSuccess:
		return nil
	case c.Code == alipay.CodeUnavailable || c.SubCode == alipay.SubSystemError || strings.HasPrefix(c.SubCode, "isp.unknow"):
		return fmt.Errorf("%s: %w: %s", op, ErrUnknownOutcome, detail)
	case c.SubCode == alipay.SubTradeNotExist || c.SubCode == alipay.SubBillNotExist:
		return fmt.Errorf("%s: %w: %s", op, ErrNotFound, detail)
	}
	return fmt.Errorf("%s: %w: %s", op, ErrRejected, detail)
}

func (a *aliPay) QueryPayment(ctx context.Context, outTradeNo string) (*Notice, error) {
	op := "alipay query " + outTradeNo
	var q alipay.TradeQuery
	if err := a.call(ctx, op, apMethodQuery, map[string]string{"out_trade_no": outTradeNo}, &q); err != nil {
		return nil, err
	}
	if q.OutTradeNo != outTradeNo {
		return nil, fmt.Errorf("%s: %w: answer is about %q", op, ErrMalformed, q.OutTradeNo)
	}
	st, err := apTradeState(q.TradeStatus)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	amt, err := apAmount(q.TotalAmount)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	// The answer is signed for our app_id; the trade is the seller's own.
	n := &Notice{Channel: KindAlipay, Event: EventPayment, MerchantID: a.cfg.MerchantID, AppID: a.cfg.AppID,
		OutTradeNo: q.OutTradeNo, TransactionID: q.TradeNo, AmountMinor: amt, Currency: "CNY", State: st}
	if st == StatePaid {
		if n.At, err = apTime(q.SendPayDate); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
	}
	return n, nil
}

func (a *aliPay) ClosePayment(ctx context.Context, outTradeNo string) error {
	var c alipay.TradeClose
	return a.call(ctx, "alipay close "+outTradeNo, apMethodClose, map[string]string{"out_trade_no": outTradeNo}, &c)
}

// Refund calls alipay.trade.refund with out_request_no = OutRefundNo, the
// gateway's idempotency key. fund_change "Y" proves this call refunded;
// "N" (a repeat of an executed request) is reported as refunding, to be
// confirmed with QueryRefund.
func (a *aliPay) Refund(ctx context.Context, r RefundRequest) (*Notice, error) {
	op := "alipay refund " + r.OutRefundNo
	if r.AmountMinor <= 0 || (r.TotalMinor > 0 && r.AmountMinor > r.TotalMinor) {
		return nil, fmt.Errorf("%s: %w: amount %d of total %d", op, ErrRejected, r.AmountMinor, r.TotalMinor)
	}
	biz := map[string]string{"out_trade_no": r.OutTradeNo, "refund_amount": alipay.FormatYuan(r.AmountMinor),
		"out_request_no": r.OutRefundNo, "refund_reason": r.Reason}
	var out alipay.TradeRefund
	if err := a.call(ctx, op, apMethodRefund, biz, &out); err != nil {
		return nil, err
	}
	if out.OutTradeNo != r.OutTradeNo {
		return nil, fmt.Errorf("%s: %w: answer is about %q", op, ErrUnknownOutcome, out.OutTradeNo)
	}
	n := &Notice{Channel: KindAlipay, Event: EventRefund, MerchantID: a.cfg.MerchantID, AppID: a.cfg.AppID,
		OutTradeNo: out.OutTradeNo, TransactionID: out.TradeNo, OutRefundNo: r.OutRefundNo,
		AmountMinor: r.AmountMinor, Currency: "CNY", State: StateRefunding}
	if out.FundChange == "Y" {
		n.State = StateRefunded
	}
	var err error
	if n.RefundedTotalMinor, err = apAmount(out.RefundFee); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if n.At, err = apTime(out.GmtRefundPay); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return n, nil
}

// QueryRefund calls alipay.trade.fastpay.refund.query; an answer without
// refund_status means the refund was not executed: ErrNotFound.
func (a *aliPay) QueryRefund(ctx context.Context, outTradeNo, outRefundNo string) (*Notice, error) {
	op := "alipay refund query " + outRefundNo
	biz := map[string]any{"out_trade_no": outTradeNo, "out_request_no": outRefundNo, "query_options": []string{"gmt_refund_pay"}}
	var q alipay.RefundQuery
	if err := a.call(ctx, op, apMethodRefundQuery, biz, &q); err != nil {
		return nil, err
	}
	if q.RefundStatus == "" {
		return nil, fmt.Errorf("%s: %w: the gateway has no executed refund %s", op, ErrNotFound, outRefundNo)
	}
	if q.RefundStatus != "REFUND_SUCCESS" {
		return nil, fmt.Errorf("%s: %w: refund_status %q", op, ErrMalformed, q.RefundStatus)
	}
	if q.OutRequestNo != outRefundNo || q.OutTradeNo != outTradeNo {
		return nil, fmt.Errorf("%s: %w: answer is about %s/%s", op, ErrMalformed, q.OutTradeNo, q.OutRequestNo)
	}
	amt, err := apAmount(q.RefundAmount)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	n := &Notice{Channel: KindAlipay, Event: EventRefund, MerchantID: a.cfg.MerchantID, AppID: a.cfg.AppID,
		OutTradeNo: q.OutTradeNo, TransactionID: q.TradeNo, OutRefundNo: q.OutRequestNo,
		AmountMinor: amt, Currency: "CNY", State: StateRefunded}
	if n.At, err = apTime(q.GmtRefundPay); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return n, nil
}

// Bill asks for the trade bill's download URL of the channel's day (China
// time, UTC+8) that contains the instant day, and downloads the zip.
func (a *aliPay) Bill(ctx context.Context, day time.Time) ([]BillLine, error) {
	date := day.In(alipay.ChinaTime).Format("2006-01-02")
	op := "alipay bill " + date
	var bu alipay.BillURL
	if err := a.call(ctx, op, apMethodBillURL, map[string]string{"bill_type": "trade", "bill_date": date}, &bu); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, bu.BillDownloadURL, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: bill_download_url: %v", op, ErrMalformed, err)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, transportError(op+": download", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, transportError(op+": download", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(op+": download", resp.StatusCode, "")
	}
	rows, err := alipay.ParseBill(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", op, ErrMalformed, err)
	}
	return apBillLines(date, a.cfg.MerchantID, rows)
}

func apBillLines(date, merchant string, rows []alipay.BillRow) ([]BillLine, error) {
	out := make([]BillLine, 0, len(rows))
	for _, r := range rows {
		at, err := apTime(r.Finished)
		if err != nil {
			return nil, err
		}
		l := BillLine{Day: date, MerchantID: merchant, OutTradeNo: r.OutTradeNo, TransactionID: r.TradeNo,
			Currency: "CNY", FeeMinor: -r.ServiceFee, At: at}
		if r.Type == alipay.BillRefund {
			l.Event, l.OutRefundNo, l.AmountMinor, l.State = EventRefund, r.OutRequestNo, -r.OrderAmount, StateRefunded
		} else {
			l.Event, l.AmountMinor, l.State = EventPayment, r.OrderAmount, StatePaid
		}
		out = append(out, l)
	}
	return out, nil
}
