// Package alipay is the wire protocol of the Alipay open platform gateway as
// its published specification defines it: RSA2 (SHA256WithRSA) signatures
// over sorted parameters, the gateway's request and signed JSON responses,
// the asynchronous notify form and the trade bill file.
//
// It is written with the Go standard library by hand because Alipay's SDK is
// not available from the module proxy this project builds with. It holds no
// state and does no I/O, so Keel's client (package channel) and the channel
// simulator (package paysim) share one format.
package alipay

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ChinaTime is the gateway's zone (UTC+8): timestamps, gmt_* and bill days.
var ChinaTime = time.FixedZone("CST", 8*3600)

// TimeLayout is the gateway's timestamp format.
const TimeLayout = "2006-01-02 15:04:05"

// RetrySchedule is the published interval between notify attempts until the
// merchant answers the literal "success" (about 25h in all).
var RetrySchedule = []time.Duration{
	4 * time.Minute, 10 * time.Minute, 10 * time.Minute, time.Hour,
	2 * time.Hour, 6 * time.Hour, 15 * time.Hour,
}

// Replies a notify receiver writes, as the gateway expects them.
const (
	ReplySuccess = "success"
	ReplyFail    = "fail"
)

// SignContent is the string a signature covers: the parameters sorted by
// name, empty values and the excluded names left out, joined as k=v&k=v
// with the values as they are (not URL-encoded).
func SignContent(params url.Values, exclude ...string) string {
	keys := make([]string, 0, len(params))
	for k, v := range params {
		if len(v) == 0 || v[0] == "" || contains(exclude, k) {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(params.Get(k))
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Sign signs content with SHA256WithRSA and returns it base64-encoded.
func Sign(key *rsa.PrivateKey, content []byte) (string, error) {
	sum := sha256.Sum256(content)
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("alipay: signing: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// ErrBadSignature is returned by Verify when the signature does not match.
var ErrBadSignature = errors.New("alipay: signature does not verify")

// Verify checks a base64 SHA256WithRSA signature over content.
func Verify(pub *rsa.PublicKey, content []byte, signatureB64 string) error {
	sig, err := base64.StdEncoding.DecodeString(signatureB64)
	if err != nil || len(sig) == 0 {
		return fmt.Errorf("%w: signature is not base64", ErrBadSignature)
	}
	sum := sha256.Sum256(content)
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		return ErrBadSignature
	}
	return nil
}

// ParsePrivateKey reads an RSA private key in PKCS#8 or PKCS#1 PEM.
func ParsePrivateKey(pemBytes []byte) (*rsa.PrivateKey, error) {
	blk, _ := pem.Decode(pemBytes)
	if blk == nil {
		return nil, errors.New("alipay: private key is not PEM")
	}
	if k, err := x509.ParsePKCS8PrivateKey(blk.Bytes); err == nil {
		if rk, ok := k.(*rsa.PrivateKey); ok {
			return rk, nil
		}
		return nil, errors.New("alipay: private key is not RSA")
	}
	k, err := x509.ParsePKCS1PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("alipay: parsing private key: %w", err)
	}
	return k, nil
}

// ParsePublicKey reads an RSA public key in PKIX ("PUBLIC KEY") PEM, the
// form the open platform hands out as "支付宝公钥".
func ParsePublicKey(pemBytes []byte) (*rsa.PublicKey, error) {
	blk, _ := pem.Decode(pemBytes)
	if blk == nil {
		return nil, errors.New("alipay: public key is not PEM")
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("alipay: parsing public key: %w", err)
	}
	rk, ok := k.(*rsa.PublicKey)
	if !ok {
		return nil, errors.New("alipay: public key is not RSA")
	}
	return rk, nil
}

// ResponseNode is the JSON member holding a method's answer:
// alipay.trade.query → alipay_trade_query_response.
func ResponseNode(method string) string {
	return strings.ReplaceAll(method, ".", "_") + "_response"
}

// ErrResponse is wrapped when a gateway response is not the documented shape.
var ErrResponse = errors.New("alipay: malformed gateway response")

// SplitResponse returns the exact bytes of the method's response node (or
// of error_response, which the gateway uses when it cannot route the call)
// and the sign member. The signature covers those bytes as sent, so they
// are kept raw rather than re-encoded.
func SplitResponse(body []byte, method string) (node json.RawMessage, sign string, err error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrResponse, err)
	}
	node, ok := top[ResponseNode(method)]
	if !ok {
		if node, ok = top["error_response"]; !ok {
			return nil, "", fmt.Errorf("%w: no %s", ErrResponse, ResponseNode(method))
		}
	}
	if s, ok := top["sign"]; ok {
		if err := json.Unmarshal(s, &sign); err != nil {
			return nil, "", fmt.Errorf("%w: sign is not a string", ErrResponse)
		}
	}
	return node, sign, nil
}

// Common is the status part of every response node.
type Common struct {
	Code    string `json:"code"`
	Msg     string `json:"msg"`
	SubCode string `json:"sub_code,omitempty"`
	SubMsg  string `json:"sub_msg,omitempty"`
}

// Gateway result codes.
const (
	CodeSuccess      = "10000"
	CodeUnavailable  = "20000" // 服务不可用: outcome unknown
	CodeUnauthorized = "20001"
	CodeMissingParam = "40001"
	CodeInvalidParam = "40002"
	CodeBusiness     = "40004" // 业务处理失败: see sub_code
	CodeNoPermission = "40006"
)

// Business sub codes the client classifies.
const (
	SubTradeNotExist = "ACQ.TRADE_NOT_EXIST"
	SubSystemError   = "ACQ.SYSTEM_ERROR"
	SubTradeStatus   = "ACQ.TRADE_STATUS_ERROR"
	SubRefundExceed  = "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL"
	SubSellerBalance = "ACQ.SELLER_BALANCE_NOT_ENOUGH"
	SubInvalidParam  = "isv.invalid-parameter"
	SubInvalidSign   = "isv.invalid-signature"
	SubInvalidAppID  = "isv.invalid-app-id"
	SubBillNotExist  = "isp.bill_not_exist"
)

// TradeQuery answers alipay.trade.query.
type TradeQuery struct {
	Common
	TradeNo      string `json:"trade_no,omitempty"`
	OutTradeNo   string `json:"out_trade_no,omitempty"`
	BuyerLogonID string `json:"buyer_logon_id,omitempty"`
	TradeStatus  string `json:"trade_status,omitempty"` // WAIT_BUYER_PAY, TRADE_CLOSED, TRADE_SUCCESS, TRADE_FINISHED
	TotalAmount  string `json:"total_amount,omitempty"`
	SendPayDate  string `json:"send_pay_date,omitempty"`
	BuyerUserID  string `json:"buyer_user_id,omitempty"`
}

// TradeClose answers alipay.trade.close.
type TradeClose struct {
	Common
	TradeNo    string `json:"trade_no,omitempty"`
	OutTradeNo string `json:"out_trade_no,omitempty"`
}

// TradeRefund answers alipay.trade.refund. FundChange "Y" means this call
// moved money; "N" on a repeated out_request_no means it had moved before.
type TradeRefund struct {
	Common
	TradeNo      string `json:"trade_no,omitempty"`
	OutTradeNo   string `json:"out_trade_no,omitempty"`
	BuyerLogonID string `json:"buyer_logon_id,omitempty"`
	FundChange   string `json:"fund_change,omitempty"`
	RefundFee    string `json:"refund_fee,omitempty"`
	GmtRefundPay string `json:"gmt_refund_pay,omitempty"`
}

// RefundQuery answers alipay.trade.fastpay.refund.query. A refund that was
// never executed comes back with code 10000 and no refund_status.
type RefundQuery struct {
	Common
	TradeNo      string `json:"trade_no,omitempty"`
	OutTradeNo   string `json:"out_trade_no,omitempty"`
	OutRequestNo string `json:"out_request_no,omitempty"`
	TotalAmount  string `json:"total_amount,omitempty"`
	RefundAmount string `json:"refund_amount,omitempty"`
	RefundStatus string `json:"refund_status,omitempty"` // REFUND_SUCCESS
	GmtRefundPay string `json:"gmt_refund_pay,omitempty"`
}

// BillURL answers alipay.data.dataservice.bill.downloadurl.query.
type BillURL struct {
	Common
	BillDownloadURL string `json:"bill_download_url,omitempty"`
}

// FormatYuan writes fen as yuan with two decimals.
func FormatYuan(fen int64) string {
	sign := ""
	u := uint64(fen)
	if fen < 0 {
		sign, u = "-", uint64(-fen)
	}
	return fmt.Sprintf("%s%d.%02d", sign, u/100, u%100)
}

// ParseYuan reads a decimal yuan amount with at most two decimals into fen.
func ParseYuan(s string) (int64, error) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(whole) > 15 || len(frac) > 2 || strings.Trim(whole+frac, "0123456789") != "" {
		return 0, fmt.Errorf("alipay: %q is not an amount in yuan", s)
	}
	for len(frac) < 2 {
		frac += "0"
	}
	v, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("alipay: %q is not an amount in yuan", s)
	}
	if neg {
		v = -v
	}
	return v, nil
}

// ParseTime reads a gateway timestamp (China time) as UTC.
func ParseTime(s string) (time.Time, error) {
	t, err := time.ParseInLocation(TimeLayout, s, ChinaTime)
	if err != nil {
		return time.Time{}, fmt.Errorf("alipay: time %q: %w", s, err)
	}
	return t.UTC(), nil
}

// FormatTime writes t as a gateway timestamp.
func FormatTime(t time.Time) string { return t.In(ChinaTime).Format(TimeLayout) }
