package paysim

import (
	"crypto/rsa"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/modules/payment/channel/wechatpay"
)

// wxServer speaks WeChat Pay API v3.
type wxServer struct {
	server
	s              *Sim
	merchantKey    *rsa.PrivateKey // Keel's: the simulator verifies requests with its public half
	merchantSerial string
	apiV3Key       string
	certs          []*platformCert // guarded by s.mu; the last one signs
	bills          map[string][]byte
}

func newWXServer(s *Sim, merchantKey, platformKey *rsa.PrivateKey) (*wxServer, error) {
	c, err := newPlatformCert(platformKey, s.now())
	if err != nil {
		return nil, err
	}
	w := &wxServer{s: s, merchantKey: merchantKey, merchantSerial: fmt.Sprintf("%X", randomString(20)),
		apiV3Key: randomString(32), certs: []*platformCert{c}, bills: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v3/certificates", w.authed(w.certificates))
	mux.HandleFunc("GET /v3/pay/transactions/out-trade-no/{no}", w.authed(w.query))
	mux.HandleFunc("POST /v3/pay/transactions/out-trade-no/{no}/close", w.authed(w.close))
	mux.HandleFunc("POST /v3/refund/domestic/refunds", w.authed(w.refund))
	mux.HandleFunc("GET /v3/refund/domestic/refunds/{no}", w.authed(w.refundQuery))
	mux.HandleFunc("GET /v3/bill/tradebill", w.authed(w.tradeBill))
	mux.HandleFunc("GET /v3/billdownload/file", w.authed(w.download))
	w.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return w, nil
}

func (w *wxServer) currentCert() *platformCert {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.certs[len(w.certs)-1]
}

type wxHandler func(rw http.ResponseWriter, r *http.Request, body []byte)

// authed checks the merchant's Authorization header before any handler:
// scheme, mchid, serial, a timestamp within five minutes, and the
// signature over method, URL, timestamp, nonce and body.
func (w *wxServer) authed(h wxHandler) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			return
		}
		a, err := wechatpay.ParseAuth(r.Header.Get("Authorization"))
		if err == nil && a.MchID != w.s.merchant(channel.KindWeChat).MerchantID {
			err = fmt.Errorf("mchid %q is not this merchant", a.MchID)
		}
		if err == nil && a.SerialNo != w.merchantSerial {
			err = fmt.Errorf("serial_no %q is not the merchant certificate", a.SerialNo)
		}
		if err == nil {
			if _, ok := wechatpay.CheckTimestamp(a.Timestamp, w.s.now()); !ok {
				err = fmt.Errorf("timestamp %q outside five minutes", a.Timestamp)
			}
		}
		if err == nil {
			err = wechatpay.Verify(&w.merchantKey.PublicKey, wechatpay.RequestMessage(r.Method, r.URL.RequestURI(), a.Timestamp, a.NonceStr, body), a.Signature)
		}
		if err != nil {
			w.s.reject()
			w.fail(rw, &refusal{status: http.StatusUnauthorized, code: wechatpay.CodeSignError, msg: "签名错误: " + err.Error()})
			return
		}
		h(rw, r, body)
	}
}

// sign returns the platform signature headers for body.
func (w *wxServer) sign(body []byte, c *platformCert, at time.Time) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	nonce := wechatpay.Nonce()
	sig, _ := wechatpay.Sign(c.key, wechatpay.NotifyMessage(ts, nonce, body))
	h := http.Header{}
	h.Set(wechatpay.HeaderTimestamp, ts)
	h.Set(wechatpay.HeaderNonce, nonce)
	h.Set(wechatpay.HeaderSignature, sig)
	h.Set(wechatpay.HeaderSerial, c.serial)
	h.Set(wechatpay.HeaderRequestID, randomString(24))
	return h
}

func (w *wxServer) write(rw http.ResponseWriter, status int, v any) {
	var body []byte
	if v != nil {
		body, _ = json.Marshal(v)
	}
	for k, vals := range w.sign(body, w.currentCert(), w.s.now()) {
		rw.Header()[k] = vals
	}
	if body != nil {
		rw.Header().Set("Content-Type", "application/json")
	}
	rw.WriteHeader(status)
	_, _ = rw.Write(body)
}

func (w *wxServer) fail(rw http.ResponseWriter, f *refusal) {
	w.write(rw, f.status, wechatpay.Error{Code: f.code, Message: f.msg})
}

func (w *wxServer) certificates(rw http.ResponseWriter, _ *http.Request, _ []byte) {
	w.s.mu.Lock()
	w.s.c.certFetches++
	certs := append([]*platformCert(nil), w.certs...)
	w.s.mu.Unlock()
	var out wechatpay.Certificates
	for _, c := range certs {
		nonce := randomString(12)
		ct, err := wechatpay.Encrypt(w.apiV3Key, nonce, "certificate", c.pem)
		if err != nil {
			w.fail(rw, refSystem)
			return
		}
		out.Data = append(out.Data, wechatpay.Certificate{SerialNo: c.serial,
			EffectiveTime: c.from.In(chinaTime).Format(time.RFC3339), ExpireTime: c.until.In(chinaTime).Format(time.RFC3339),
			EncryptCertificate: wechatpay.Resource{Algorithm: wechatpay.AlgorithmAEAD, Nonce: nonce,
				AssociatedData: "certificate", Ciphertext: ct}})
	}
	w.write(rw, http.StatusOK, out)
}

func (w *wxServer) transaction(t trade) wechatpay.Transaction {
	m := w.s.merchant(channel.KindWeChat)
	out := wechatpay.Transaction{AppID: m.AppID, MchID: m.MerchantID, OutTradeNo: t.outTradeNo,
		TradeType: "JSAPI", Amount: &wechatpay.Money{Total: t.amount, Currency: t.currency, PayerCurrency: t.currency}}
	switch t.state {
	case channel.StatePaid:
		out.TradeState, out.TradeStateDesc = "SUCCESS", "支付成功"
		if t.refunded > 0 {
			out.TradeState, out.TradeStateDesc = "REFUND", "转入退款"
		}
		out.TransactionID, out.BankType = t.transactionID, "CMB_DEBIT"
		out.SuccessTime = t.paidAt.In(chinaTime).Format(time.RFC3339)
		out.Payer = &wechatpay.Payer{OpenID: "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}
		out.Amount.PayerTotal = t.amount
	case channel.StateClosed:
		out.TradeState, out.TradeStateDesc = "CLOSED", "订单已关闭"
	default:
		out.TradeState, out.TradeStateDesc = "NOTPAY", "订单未支付"
	}
	return out
}

func (w *wxServer) query(rw http.ResponseWriter, r *http.Request, _ []byte) {
	if r.URL.Query().Get("mchid") != w.s.merchant(channel.KindWeChat).MerchantID {
		w.fail(rw, refMalformed)
		return
	}
	t, ok := w.s.findTrade(channel.KindWeChat, r.PathValue("no"))
	if !ok {
		w.fail(rw, refNoTrade)
		return
	}
	w.write(rw, http.StatusOK, w.transaction(t))
}

func (w *wxServer) close(rw http.ResponseWriter, r *http.Request, body []byte) {
	var c wechatpay.Close
	if json.Unmarshal(body, &c) != nil || c.MchID != w.s.merchant(channel.KindWeChat).MerchantID {
		w.fail(rw, refMalformed)
		return
	}
	if f := w.s.closeTrade(channel.KindWeChat, r.PathValue("no")); f != nil {
		w.fail(rw, f)
		return
	}
	w.write(rw, http.StatusNoContent, nil)
}

func (w *wxServer) refundBody(r refund, total int64, currency string) wechatpay.Refund {
	out := wechatpay.Refund{RefundID: r.refundID, OutRefundNo: r.outRefundNo, TransactionID: r.transactionID,
		OutTradeNo: r.outTradeNo, Channel: "ORIGINAL", UserReceivedAccount: "招商银行信用卡0403",
		CreateTime: r.created.In(chinaTime).Format(time.RFC3339), FundsAccount: "AVAILABLE",
		Amount: wechatpay.RefundAmount{Refund: r.amount, Total: total, Currency: currency, PayerTotal: total, PayerRefund: r.amount}}
	switch r.state {
	case channel.StateRefunded:
		out.Status, out.SuccessTime = "SUCCESS", r.at.In(chinaTime).Format(time.RFC3339)
	case channel.StateRefunding:
		out.Status = "PROCESSING"
	default:
		out.Status = "ABNORMAL"
	}
	return out
}

func (w *wxServer) tradeTotal(outTradeNo string) (int64, string) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if t, ok := w.s.trades[key{channel.KindWeChat, outTradeNo}]; ok {
		return t.amount, t.currency
	}
	return 0, ""
}

func (w *wxServer) refund(rw http.ResponseWriter, r *http.Request, body []byte) {
	var in wechatpay.RefundCreate
	if json.Unmarshal(body, &in) != nil || in.OutRefundNo == "" || in.OutTradeNo == "" {
		w.fail(rw, refMalformed)
		return
	}
	total, currency := w.tradeTotal(in.OutTradeNo)
	if total != 0 && (in.Amount.Total != total || in.Amount.Currency != currency) {
		w.s.mu.Lock()
		w.s.c.refundCalls[in.OutRefundNo]++
		w.s.mu.Unlock()
		w.fail(rw, &refusal{status: 400, code: wechatpay.CodeParamError, msg: "订单金额或币种与原订单不一致"})
		return
	}
	rf, f, out := w.s.doRefund(channel.KindWeChat, in.OutTradeNo, in.OutRefundNo, in.Amount.Refund)
	switch {
	case out == hang:
		<-r.Context().Done() // executed; the answer never comes
		return
	case out == disconnect:
		cutConnection(rw)
		return
	case f != nil:
		w.fail(rw, f)
		return
	}
	w.write(rw, http.StatusOK, w.refundBody(*rf, total, currency))
}

func (w *wxServer) refundQuery(rw http.ResponseWriter, r *http.Request, _ []byte) {
	rf, f := w.s.findRefund(channel.KindWeChat, r.PathValue("no"))
	if f != nil {
		w.fail(rw, f)
		return
	}
	total, currency := w.tradeTotal(rf.outTradeNo)
	w.write(rw, http.StatusOK, w.refundBody(rf, total, currency))
}

func (w *wxServer) tradeBill(rw http.ResponseWriter, r *http.Request, _ []byte) {
	day, err := time.ParseInLocation("2006-01-02", r.URL.Query().Get("bill_date"), chinaTime)
	if err != nil {
		w.fail(rw, refMalformed)
		return
	}
	file := wechatpay.WriteBill(w.s.wxBillRows(day))
	sum := sha1.Sum(file)
	token := randomString(24)
	w.s.mu.Lock()
	w.bills[token] = file
	w.s.mu.Unlock()
	w.write(rw, http.StatusOK, wechatpay.BillURL{HashType: "SHA1", HashValue: hex.EncodeToString(sum[:]),
		DownloadURL: w.base + "/v3/billdownload/file?token=" + token})
}

func (w *wxServer) download(rw http.ResponseWriter, r *http.Request, _ []byte) {
	w.s.mu.Lock()
	file, ok := w.bills[r.URL.Query().Get("token")]
	w.s.mu.Unlock()
	if !ok {
		w.fail(rw, &refusal{status: 404, code: wechatpay.CodeResourceNotExists, msg: "账单文件不存在"})
		return
	}
	rw.Header().Set("Content-Type", "application/octet-stream")
	_, _ = rw.Write(file)
}

// callback builds one signed notification attempt.
func (w *wxServer) callback(cb *callback) (http.Header, []byte, error) {
	var plain []byte
	event, summary, original := "TRANSACTION.SUCCESS", "支付成功", "transaction"
	w.s.mu.Lock()
	if cb.outRefundNo != "" {
		r, ok := w.s.refunds[key{channel.KindWeChat, cb.outRefundNo}]
		t := w.s.trades[key{channel.KindWeChat, cb.outTradeNo}]
		if !ok || t == nil {
			w.s.mu.Unlock()
			return nil, nil, fmt.Errorf("paysim: no refund %q", cb.outRefundNo)
		}
		n := wechatpay.RefundNotice{MchID: w.s.merchant(channel.KindWeChat).MerchantID, OutTradeNo: r.outTradeNo,
			TransactionID: r.transactionID, OutRefundNo: r.outRefundNo, RefundID: r.refundID,
			RefundStatus: "SUCCESS", SuccessTime: r.at.In(chinaTime).Format(time.RFC3339),
			UserReceivedAccount: "招商银行信用卡0403"}
		n.Amount.Total, n.Amount.Refund, n.Amount.PayerTotal, n.Amount.PayerRefund = t.amount, r.amount, t.amount, r.amount
		plain, _ = json.Marshal(n)
		event, summary, original = "REFUND.SUCCESS", "退款成功", "refund"
	} else {
		t, ok := w.s.trades[key{channel.KindWeChat, cb.outTradeNo}]
		if !ok {
			w.s.mu.Unlock()
			return nil, nil, fmt.Errorf("paysim: no trade %q", cb.outTradeNo)
		}
		tx := w.transaction(*t)
		if t.state == channel.StatePaid {
			// The notification describes the payment as it succeeded, even
			// when a retry goes out after a refund.
			tx.TradeState, tx.TradeStateDesc = "SUCCESS", "支付成功"
		}
		plain, _ = json.Marshal(tx)
	}
	w.s.mu.Unlock()
	res, err := w.Resource(plain, original)
	if err != nil {
		return nil, nil, err
	}
	body, _ := json.Marshal(wechatpay.Notification{ID: cb.notifyID, CreateTime: w.s.now().In(chinaTime).Format(time.RFC3339),
		EventType: event, ResourceType: "encrypt-resource", Summary: summary, Resource: res})
	h := w.sign(body, w.currentCert(), w.s.now())
	h.Set("Content-Type", "application/json")
	return h, body, nil
}

// Resource encrypts plaintext as a notification resource with the APIv3 key.
func (w *wxServer) Resource(plain []byte, associatedData string) (wechatpay.Resource, error) {
	nonce := randomString(12)
	ct, err := wechatpay.Encrypt(w.apiV3Key, nonce, associatedData, plain)
	if err != nil {
		return wechatpay.Resource{}, err
	}
	return wechatpay.Resource{Algorithm: wechatpay.AlgorithmAEAD, Ciphertext: ct, AssociatedData: associatedData,
		OriginalType: associatedData, Nonce: nonce}, nil
}

// WeChatResource encrypts plaintext as the channel would (for tests that
// forge notifications).
func (s *Sim) WeChatResource(plain []byte, associatedData string) (wechatpay.Resource, error) {
	return s.wx.Resource(plain, associatedData)
}

// SignWeChat signs body as a notification. Zero serial, time or key mean
// the current certificate's serial, the channel's clock and its key.
func (s *Sim) SignWeChat(body []byte, serial string, at time.Time, k *rsa.PrivateKey) http.Header {
	c := *s.wx.currentCert()
	if serial != "" {
		c.serial = serial
	}
	if k != nil {
		c.key = k
	}
	if at.IsZero() {
		at = s.now()
	}
	h := s.wx.sign(body, &c, at)
	h.Set("Content-Type", "application/json")
	return h
}

// cutConnection closes the connection without answering: the request was
// received and acted on, the client sees the connection end.
func cutConnection(rw http.ResponseWriter) {
	hj, ok := rw.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = buf.Flush()
	_ = conn.Close()
}
