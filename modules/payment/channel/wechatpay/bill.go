package wechatpay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// BillColumns are the header of a trade bill of type ALL, in the published
// order. Every data field is written with a leading backtick so spreadsheet
// programs keep long numbers as text; fields are separated by ",`".
var BillColumns = []string{
	"交易时间", "公众账号ID", "商户号", "特约商户号", "设备号", "微信订单号", "商户订单号",
	"用户标识", "交易类型", "交易状态", "付款银行", "货币种类", "应结订单金额", "代金券金额",
	"微信退款单号", "商户退款单号", "退款金额", "充值券退款金额", "退款类型", "退款状态",
	"商品名称", "商户数据包", "手续费", "费率", "订单金额", "申请退款金额", "费率备注",
}

// BillSummaryColumns head the summary after the data rows.
var BillSummaryColumns = []string{
	"总交易单数", "应结订单总金额", "退款总金额", "充值券退款总金额", "手续费总金额", "订单总金额", "申请退款总金额",
}

// BillRow is one data row, amounts in fen. A payment row has TradeState
// SUCCESS (or the trade's final word) and SettlementTotal; a refund row has
// TradeState REFUND, the refund numbers, RefundAmount and RefundStatus.
type BillRow struct {
	TradeTime       string // "2006-01-02 15:04:05" China time
	AppID           string
	MchID           string
	TransactionID   string
	OutTradeNo      string
	OpenID          string
	TradeType       string
	TradeState      string
	BankType        string
	Currency        string
	SettlementTotal int64
	RefundID        string
	OutRefundNo     string
	RefundAmount    int64
	RefundType      string
	RefundStatus    string
	Body            string
	Fee             int64
	Rate            string
	OrderAmount     int64
	RefundApplied   int64
}

// FormatYuan writes fen as yuan with two decimals ("-0.05", "1288.00").
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
		return 0, fmt.Errorf("wechatpay: %q is not an amount in yuan", s)
	}
	for len(frac) < 2 {
		frac += "0"
	}
	v, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("wechatpay: %q is not an amount in yuan", s)
	}
	if neg {
		v = -v
	}
	return v, nil
}

// WriteBill renders rows as the channel's trade bill file.
func WriteBill(rows []BillRow) []byte {
	var b bytes.Buffer
	b.WriteString(strings.Join(BillColumns, ",") + "\r\n")
	var settle, refund, fee, order, applied int64
	for _, r := range rows {
		f := []string{r.TradeTime, r.AppID, r.MchID, "0", "", r.TransactionID, r.OutTradeNo,
			r.OpenID, r.TradeType, r.TradeState, r.BankType, r.Currency, FormatYuan(r.SettlementTotal), "0.00",
			r.RefundID, r.OutRefundNo, FormatYuan(r.RefundAmount), "0.00", r.RefundType, r.RefundStatus,
			r.Body, "", FormatYuan(r.Fee), r.Rate, FormatYuan(r.OrderAmount), FormatYuan(r.RefundApplied), ""}
		b.WriteString("`" + strings.Join(f, ",`") + "\r\n")
		settle += r.SettlementTotal
		refund += r.RefundAmount
		fee += r.Fee
		order += r.OrderAmount
		applied += r.RefundApplied
	}
	b.WriteString(strings.Join(BillSummaryColumns, ",") + "\r\n")
	s := []string{strconv.Itoa(len(rows)), FormatYuan(settle), FormatYuan(refund), "0.00",
		FormatYuan(fee), FormatYuan(order), FormatYuan(applied)}
	b.WriteString("`" + strings.Join(s, ",`") + "\r\n")
	return b.Bytes()
}

// ErrBill is wrapped by every bill parsing error.
var ErrBill = errors.New("wechatpay: malformed trade bill")

// maxBillLine bounds one line so a hostile file cannot exhaust memory.
const maxBillLine = 64 << 10

// ParseBill reads a trade bill file. Columns are found by header name, so a
// reordered or extended header still parses; the summary's count and
// totals must agree with the rows (a truncated download is an error).
func ParseBill(data []byte) ([]BillRow, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxBillLine)
	if !sc.Scan() {
		return nil, fmt.Errorf("%w: empty file", ErrBill)
	}
	idx := map[string]int{}
	for i, name := range strings.Split(strings.TrimRight(strings.TrimPrefix(sc.Text(), "\ufeff"), "\r"), ",") {
		idx[name] = i
	}
	for _, need := range []string{"交易时间", "商户号", "微信订单号", "商户订单号", "交易状态", "货币种类", "应结订单金额", "退款金额"} {
		if _, ok := idx[need]; !ok {
			return nil, fmt.Errorf("%w: header lacks %s", ErrBill, need)
		}
	}
	var rows []BillRow
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, BillSummaryColumns[0]) {
			if !sc.Scan() {
				return nil, fmt.Errorf("%w: summary has no values", ErrBill)
			}
			if err := checkSummary(strings.TrimRight(sc.Text(), "\r"), rows); err != nil {
				return nil, err
			}
			return rows, nil
		}
		r, err := parseRow(line, idx)
		if err != nil {
			return nil, fmt.Errorf("%w: row %d: %v", ErrBill, len(rows)+1, err)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBill, err)
	}
	return nil, fmt.Errorf("%w: no summary (truncated file?)", ErrBill)
}

func splitFields(line string) ([]string, bool) {
	if !strings.HasPrefix(line, "`") {
		return nil, false
	}
	return strings.Split(line[1:], ",`"), true
}

func parseRow(line string, idx map[string]int) (BillRow, error) {
	f, ok := splitFields(line)
	if !ok {
		return BillRow{}, errors.New("field does not start with a backtick")
	}
	get := func(name string) string {
		if i, ok := idx[name]; ok && i < len(f) {
			return f[i]
		}
		return ""
	}
	if len(f) < len(idx) {
		return BillRow{}, fmt.Errorf("%d fields, header has %d", len(f), len(idx))
	}
	amount := func(name string) (int64, error) {
		v := get(name)
		if v == "" {
			return 0, nil
		}
		return ParseYuan(v)
	}
	r := BillRow{
		TradeTime: get("交易时间"), AppID: get("公众账号ID"), MchID: get("商户号"),
		TransactionID: get("微信订单号"), OutTradeNo: get("商户订单号"), OpenID: get("用户标识"),
		TradeType: get("交易类型"), TradeState: get("交易状态"), BankType: get("付款银行"),
		Currency: get("货币种类"), RefundID: get("微信退款单号"), OutRefundNo: get("商户退款单号"),
		RefundType: get("退款类型"), RefundStatus: get("退款状态"), Body: get("商品名称"), Rate: get("费率"),
	}
	var err error
	for _, a := range []struct {
		name string
		dst  *int64
	}{{"应结订单金额", &r.SettlementTotal}, {"退款金额", &r.RefundAmount}, {"手续费", &r.Fee},
		{"订单金额", &r.OrderAmount}, {"申请退款金额", &r.RefundApplied}} {
		if *a.dst, err = amount(a.name); err != nil {
			return r, fmt.Errorf("%s: %v", a.name, err)
		}
	}
	if r.OutTradeNo == "" || r.TradeState == "" {
		return r, errors.New("no 商户订单号 or 交易状态")
	}
	return r, nil
}

func checkSummary(line string, rows []BillRow) error {
	f, ok := splitFields(line)
	if !ok || len(f) < 5 {
		return fmt.Errorf("%w: summary values malformed", ErrBill)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n != len(rows) {
		return fmt.Errorf("%w: summary counts %q rows, file has %d", ErrBill, f[0], len(rows))
	}
	var settle, refund int64
	for _, r := range rows {
		settle += r.SettlementTotal
		refund += r.RefundAmount
	}
	if s, err := ParseYuan(f[1]); err != nil || s != settle {
		return fmt.Errorf("%w: summary settlement total %q does not match the rows", ErrBill, f[1])
	}
	if s, err := ParseYuan(f[2]); err != nil || s != refund {
		return fmt.Errorf("%w: summary refund total %q does not match the rows", ErrBill, f[2])
	}
	return nil
}
