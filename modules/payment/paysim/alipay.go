package paysim

import (
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/modules/payment/channel/alipay"
)

// apGatewayPath is the gateway's one API endpoint.
const apGatewayPath = "/gateway.do"

// apServer speaks the Alipay open platform gateway.
type apServer struct {
	server
	s           *Sim
	appKey      *rsa.PrivateKey // Keel's: the gateway verifies requests with its public half
	platformKey *rsa.PrivateKey // the gateway's; guarded by s.mu
	bills       map[string][]byte
}

func newAPServer(s *Sim, appKey, platformKey *rsa.PrivateKey) *apServer {
	a := &apServer{s: s, appKey: appKey, platformKey: platformKey, bills: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+apGatewayPath, a.gateway)
	mux.HandleFunc("GET /downloadBill", a.download)
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return a
}

func (a *apServer) key() *rsa.PrivateKey {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	return a.platformKey
}

// write answers {"<method>_response":{…},"sign":"…"}, the sign over the
// node's exact bytes.
func (a *apServer) write(rw http.ResponseWriter, method string, node any) {
	nb, _ := json.Marshal(node)
	sig, _ := alipay.Sign(a.key(), nb)
	sb, _ := json.Marshal(sig)
	rw.Header().Set("Content-Type", "application/json;charset=utf-8")
	fmt.Fprintf(rw, `{"%s":%s,"sign":%s}`, alipay.ResponseNode(method), nb, sb)
}

func apFail(f *refusal) alipay.Common {
	if f == refSystem {
		return alipay.Common{Code: alipay.CodeUnavailable, Msg: "Service Currently Unavailable", SubCode: f.sub, SubMsg: f.msg}
	}
	if f == refMalformed {
		return alipay.Common{Code: alipay.CodeInvalidParam, Msg: "Invalid Arguments", SubCode: f.sub, SubMsg: f.msg}
	}
	return alipay.Common{Code: alipay.CodeBusiness, Msg: "Business Failed", SubCode: f.sub, SubMsg: f.msg}
}

var apOK = alipay.Common{Code: alipay.CodeSuccess, Msg: "Success"}

func (a *apServer) gateway(rw http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	p, err := url.ParseQuery(string(body))
	method := p.Get("method")
	if err != nil || method == "" {
		a.s.reject()
		a.write(rw, "error", alipay.Common{Code: alipay.CodeMissingParam, Msg: "Missing Required Arguments", SubCode: "isv.missing-method"})
		return
	}
	m := a.s.merchant(channel.KindAlipay)
	switch {
	case p.Get("app_id") != m.AppID:
		a.s.reject()
		a.write(rw, method, alipay.Common{Code: alipay.CodeInvalidParam, Msg: "Invalid Arguments", SubCode: alipay.SubInvalidAppID, SubMsg: "无效的AppID参数"})
		return
	case p.Get("sign_type") != "RSA2" || alipay.Verify(&a.appKey.PublicKey, []byte(alipay.SignContent(p, "sign")), p.Get("sign")) != nil:
		a.s.reject()
		a.write(rw, method, alipay.Common{Code: alipay.CodeInvalidParam, Msg: "Invalid Arguments", SubCode: alipay.SubInvalidSign, SubMsg: "验签出错"})
		return
	}
	var biz map[string]any
	if json.Unmarshal([]byte(p.Get("biz_content")), &biz) != nil {
		a.write(rw, method, apFail(refMalformed))
		return
	}
	str := func(k string) string { s, _ := biz[k].(string); return s }
	switch method {
	case "alipay.trade.query":
		a.query(rw, method, str("out_trade_no"))
	case "alipay.trade.close":
		if f := a.s.closeTrade(channel.KindAlipay, str("out_trade_no")); f != nil {
			a.write(rw, method, apFail(f))
			return
		}
		a.write(rw, method, alipay.TradeClose{Common: apOK, OutTradeNo: str("out_trade_no"), TradeNo: a.tradeNo(str("out_trade_no"))})
	case "alipay.trade.refund":
		a.refund(rw, r, method, str("out_trade_no"), str("out_request_no"), str("refund_amount"))
	case "alipay.trade.fastpay.refund.query":
		a.refundQuery(rw, method, str("out_trade_no"), str("out_request_no"))
	case "alipay.data.dataservice.bill.downloadurl.query":
		a.billURL(rw, method, str("bill_type"), str("bill_date"))
	default:
		a.write(rw, method, alipay.Common{Code: alipay.CodeInvalidParam, Msg: "Invalid Arguments", SubCode: "isv.invalid-method"})
	}
}

func (a *apServer) tradeNo(outTradeNo string) string {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	if t, ok := a.s.trades[key{channel.KindAlipay, outTradeNo}]; ok {
		return t.transactionID
	}
	return ""
}

func apStatus(t trade) string {
	switch t.state {
	case channel.StatePaid:
		return "TRADE_SUCCESS"
	case channel.StateClosed:
		return "TRADE_CLOSED"
	}
	return "WAIT_BUYER_PAY"
}

func (a *apServer) query(rw http.ResponseWriter, method, outTradeNo string) {
	t, ok := a.s.findTrade(channel.KindAlipay, outTradeNo)
	if !ok {
		a.write(rw, method, apFail(refNoTrade))
		return
	}
	q := alipay.TradeQuery{Common: apOK, TradeNo: t.transactionID, OutTradeNo: t.outTradeNo,
		TradeStatus: apStatus(t), TotalAmount: alipay.FormatYuan(t.amount)}
	if t.state == channel.StatePaid {
		q.BuyerLogonID, q.BuyerUserID, q.SendPayDate = "159****5620", "2088101117955611", alipay.FormatTime(t.paidAt)
	}
	a.write(rw, method, q)
}

func (a *apServer) refund(rw http.ResponseWriter, r *http.Request, method, outTradeNo, outRequestNo, amount string) {
	fen, err := alipay.ParseYuan(amount)
	if outRequestNo == "" || err != nil {
		a.write(rw, method, apFail(refMalformed))
		return
	}
	a.s.mu.Lock()
	_, repeat := a.s.refunds[key{channel.KindAlipay, outRequestNo}]
	a.s.mu.Unlock()
	rf, f, out := a.s.doRefund(channel.KindAlipay, outTradeNo, outRequestNo, fen)
	switch {
	case out == hang:
		<-r.Context().Done()
		return
	case out == disconnect:
		cutConnection(rw)
		return
	case f != nil:
		a.write(rw, method, apFail(f))
		return
	}
	tv, _ := a.s.Trade(channel.KindAlipay, outTradeNo)
	resp := alipay.TradeRefund{Common: apOK, TradeNo: rf.transactionID, OutTradeNo: outTradeNo,
		BuyerLogonID: "159****5620", FundChange: "Y", RefundFee: alipay.FormatYuan(tv.RefundedMinor),
		GmtRefundPay: alipay.FormatTime(rf.at)}
	if repeat {
		resp.FundChange = "N" // the money moved on an earlier call with this out_request_no
	}
	a.write(rw, method, resp)
}

func (a *apServer) refundQuery(rw http.ResponseWriter, method, outTradeNo, outRequestNo string) {
	rf, f := a.s.findRefund(channel.KindAlipay, outRequestNo)
	if f == refNoRefund {
		// The gateway answers success without refund fields: not executed.
		a.write(rw, method, alipay.RefundQuery{Common: apOK, OutTradeNo: outTradeNo, OutRequestNo: outRequestNo})
		return
	}
	if f != nil {
		a.write(rw, method, apFail(f))
		return
	}
	tv, _ := a.s.Trade(channel.KindAlipay, rf.outTradeNo)
	a.write(rw, method, alipay.RefundQuery{Common: apOK, TradeNo: rf.transactionID, OutTradeNo: rf.outTradeNo,
		OutRequestNo: rf.outRefundNo, TotalAmount: alipay.FormatYuan(tv.AmountMinor), RefundAmount: alipay.FormatYuan(rf.amount),
		RefundStatus: "REFUND_SUCCESS", GmtRefundPay: alipay.FormatTime(rf.at)})
}

func (a *apServer) billURL(rw http.ResponseWriter, method, billType, date string) {
	day, err := time.ParseInLocation("2006-01-02", date, chinaTime)
	if err != nil || billType != "trade" {
		a.write(rw, method, apFail(refMalformed))
		return
	}
	m := a.s.merchant(channel.KindAlipay)
	file, err := alipay.WriteBill(m.MerchantID+"0156", date, a.s.apBillRows(day), alipay.FormatTime(a.s.now()))
	if err != nil {
		a.write(rw, method, apFail(refSystem))
		return
	}
	token := randomString(24)
	a.s.mu.Lock()
	a.bills[token] = file
	a.s.mu.Unlock()
	a.write(rw, method, alipay.BillURL{Common: apOK,
		BillDownloadURL: a.base + "/downloadBill?bizType=trade&fileType=csv.zip&downloadFileName=" + strings.ReplaceAll(date, "-", "") + ".csv.zip&token=" + token})
}

func (a *apServer) download(rw http.ResponseWriter, r *http.Request) {
	a.s.mu.Lock()
	file, ok := a.bills[r.URL.Query().Get("token")]
	a.s.mu.Unlock()
	if !ok {
		http.Error(rw, "bill link expired", http.StatusNotFound)
		return
	}
	rw.Header().Set("Content-Type", "application/zip")
	_, _ = rw.Write(file)
}

// callback builds one notify attempt: a signed trade_status_sync form.
func (a *apServer) callback(cb *callback) (http.Header, []byte, error) {
	m := a.s.merchant(channel.KindAlipay)
	a.s.mu.Lock()
	t, ok := a.s.trades[key{channel.KindAlipay, cb.outTradeNo}]
	if !ok {
		a.s.mu.Unlock()
		return nil, nil, fmt.Errorf("paysim: no trade %q", cb.outTradeNo)
	}
	p := url.Values{
		"notify_time": {alipay.FormatTime(a.s.now())}, "notify_type": {"trade_status_sync"}, "notify_id": {cb.notifyID},
		"app_id": {m.AppID}, "charset": {"utf-8"}, "version": {"1.0"}, "trade_no": {t.transactionID},
		"out_trade_no": {t.outTradeNo}, "buyer_id": {"2088101117955611"}, "buyer_logon_id": {"159****5620"},
		"seller_id": {m.MerchantID}, "trade_status": {apStatus(*t)}, "total_amount": {alipay.FormatYuan(t.amount)},
		"receipt_amount": {alipay.FormatYuan(t.amount)}, "subject": {"Keel 订单"},
		"gmt_create": {alipay.FormatTime(t.created)}, "gmt_payment": {alipay.FormatTime(t.paidAt)},
	}
	if cb.outRefundNo != "" {
		r, ok := a.s.refunds[key{channel.KindAlipay, cb.outRefundNo}]
		if !ok {
			a.s.mu.Unlock()
			return nil, nil, fmt.Errorf("paysim: no refund %q", cb.outRefundNo)
		}
		p.Set("out_biz_no", r.outRefundNo)
		p.Set("refund_fee", alipay.FormatYuan(t.refunded))
		p.Set("gmt_refund", alipay.FormatTime(r.at))
		if t.refunded == t.amount {
			p.Set("trade_status", "TRADE_CLOSED")
		}
	}
	a.s.mu.Unlock()
	body := a.s.SignAlipay(p, nil)
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	return h, body, nil
}

// SignAlipay signs notify parameters as the gateway does (sign_type RSA2,
// sign over the sorted parameters without sign and sign_type) and returns
// the form body. A nil key means the gateway's current key.
func (s *Sim) SignAlipay(p url.Values, k *rsa.PrivateKey) []byte {
	if k == nil {
		k = s.ap.key()
	}
	q := url.Values{}
	for name, v := range p {
		q[name] = append([]string(nil), v...)
	}
	q.Del("sign")
	q.Set("sign_type", "RSA2")
	sig, _ := alipay.Sign(k, []byte(alipay.SignContent(q, "sign", "sign_type")))
	q.Set("sign", sig)
	return []byte(q.Encode())
}
