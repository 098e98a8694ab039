package alipay

import (
	"archive/zip"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/text/encoding/simplifiedchinese"
)

// BillColumns are the header of the trade bill's 业务明细 file, in the
// published order.
var BillColumns = []string{
	"支付宝交易号", "商户订单号", "业务类型", "商品名称", "创建时间", "完成时间", "门店编号", "门店名称",
	"操作员", "终端号", "对方账户", "订单金额（元）", "商家实收（元）", "支付宝红包（元）", "集分宝（元）",
	"支付宝优惠（元）", "商家优惠（元）", "券核销金额（元）", "券名称", "商家红包消费金额（元）",
	"卡消费金额（元）", "退款批次号/请求号", "服务费（元）", "分润（元）", "备注",
}

// Business types of a bill row.
const (
	BillTrade  = "交易"
	BillRefund = "退款"
)

// BillRow is one row, amounts in fen with the file's signs: a refund row
// has negative OrderAmount and Received, and the service fee is negative
// when charged and positive when returned.
type BillRow struct {
	TradeNo      string
	OutTradeNo   string
	Type         string // BillTrade or BillRefund
	Subject      string
	Created      string // TimeLayout, China time
	Finished     string
	Buyer        string
	OrderAmount  int64
	Received     int64
	OutRequestNo string
	ServiceFee   int64
	Remark       string
}

// WriteBill renders the bill the way the download URL serves it: a zip of
// GBK-encoded CSV files (the detail file and its summary) with '#' comment
// lines around the table, fields ended by a tab so spreadsheets keep long
// numbers as text.
func WriteBill(account, day string, rows []BillRow, exportedAt string) ([]byte, error) {
	var d bytes.Buffer
	fmt.Fprintf(&d, "#支付宝业务明细查询\r\n#账号：[%s]\r\n#起始日期：[%s 00:00:00]   终止日期：[%s 23:59:59]\r\n", account, day, day)
	d.WriteString("#-----------------------------------------业务明细列表----------------------------------------\r\n")
	w := csv.NewWriter(&d)
	w.UseCRLF = true
	_ = w.Write(BillColumns)
	var nTrade, nRefund int
	var recvTrade, recvRefund int64
	for _, r := range rows {
		tab := func(s string) string { return s + "\t" }
		_ = w.Write([]string{tab(r.TradeNo), tab(r.OutTradeNo), r.Type, r.Subject, r.Created, r.Finished,
			"", "", "", "", r.Buyer, FormatYuan(r.OrderAmount), FormatYuan(r.Received), "0.00", "0.00",
			"0.00", "0.00", "0.00", "", "0.00", "0.00", tab(r.OutRequestNo), FormatYuan(r.ServiceFee), "0.00", r.Remark})
		if r.Type == BillRefund {
			nRefund++
			recvRefund += r.Received
		} else {
			nTrade++
			recvTrade += r.Received
		}
	}
	w.Flush()
	d.WriteString("#-----------------------------------------业务明细列表结束------------------------------------\r\n")
	fmt.Fprintf(&d, "#交易合计：%d笔，商家实收共%s元，商家优惠共0.00元\r\n", nTrade, FormatYuan(recvTrade))
	fmt.Fprintf(&d, "#退款合计：%d笔，商家实收退款共%s元，商家优惠退款共0.00元\r\n", nRefund, FormatYuan(recvRefund))
	fmt.Fprintf(&d, "#导出时间：[%s]\r\n", exportedAt)

	var s bytes.Buffer
	fmt.Fprintf(&s, "#支付宝业务汇总查询\r\n#账号：[%s]\r\n", account)
	sw := csv.NewWriter(&s)
	sw.UseCRLF = true
	_ = sw.Write([]string{"门店编号", "门店名称", "交易订单总笔数", "退款订单总笔数", "订单金额（元）", "商家实收（元）"})
	_ = sw.Write([]string{"合计", "", fmt.Sprint(nTrade), fmt.Sprint(nRefund), FormatYuan(recvTrade + recvRefund), FormatYuan(recvTrade + recvRefund)})
	sw.Flush()

	var z bytes.Buffer
	zw := zip.NewWriter(&z)
	base := account + "_" + strings.ReplaceAll(day, "-", "")
	for _, f := range []struct {
		name string
		body []byte
	}{{base + "_业务明细.csv", d.Bytes()}, {base + "_业务明细(汇总).csv", s.Bytes()}} {
		gbk, err := simplifiedchinese.GBK.NewEncoder().Bytes(f.body)
		if err != nil {
			return nil, fmt.Errorf("alipay: encoding bill as GBK: %w", err)
		}
		fw, err := zw.Create(f.name)
		if err != nil {
			return nil, err
		}
		if _, err := fw.Write(gbk); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return z.Bytes(), nil
}

// ErrBill is wrapped by every bill parsing error.
var ErrBill = errors.New("alipay: malformed trade bill")

// maxBillFile bounds the uncompressed detail file (a zip bomb stops here).
const maxBillFile = 512 << 20

// ParseBill reads the zip the download URL serves and returns the rows of
// its 业务明细 file. The 交易合计/退款合计 trailer must agree with the rows.
func ParseBill(zipped []byte) ([]BillRow, error) {
	zr, err := zip.NewReader(bytes.NewReader(zipped), int64(len(zipped)))
	if err != nil {
		return nil, fmt.Errorf("%w: not a zip: %v", ErrBill, err)
	}
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "_业务明细.csv") {
			rc, err := f.Open()
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrBill, err)
			}
			raw, err := io.ReadAll(io.LimitReader(rc, maxBillFile+1))
			rc.Close()
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrBill, err)
			}
			if len(raw) > maxBillFile {
				return nil, fmt.Errorf("%w: detail file over %d bytes", ErrBill, maxBillFile)
			}
			return ParseDetail(raw)
		}
	}
	return nil, fmt.Errorf("%w: no 业务明细 file in the zip", ErrBill)
}

// ParseDetail reads one GBK-encoded 业务明细 CSV file.
func ParseDetail(gbk []byte) ([]BillRow, error) {
	text, err := simplifiedchinese.GBK.NewDecoder().Bytes(gbk)
	if err != nil {
		return nil, fmt.Errorf("%w: not GBK: %v", ErrBill, err)
	}
	var table []string
	var trailer []string
	for _, line := range strings.Split(string(text), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.HasPrefix(line, "#") {
			trailer = append(trailer, line)
			continue
		}
		if strings.TrimSpace(line) != "" {
			table = append(table, line)
		}
	}
	if len(table) == 0 {
		return nil, fmt.Errorf("%w: no header", ErrBill)
	}
	cr := csv.NewReader(strings.NewReader(strings.Join(table, "\n")))
	cr.FieldsPerRecord = -1
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBill, err)
	}
	idx := map[string]int{}
	for i, h := range recs[0] {
		idx[strings.TrimSpace(h)] = i
	}
	for _, need := range []string{"支付宝交易号", "商户订单号", "业务类型", "订单金额（元）", "商家实收（元）"} {
		if _, ok := idx[need]; !ok {
			return nil, fmt.Errorf("%w: header lacks %s", ErrBill, need)
		}
	}
	rows := make([]BillRow, 0, len(recs)-1)
	for n, rec := range recs[1:] {
		r, err := parseRow(rec, idx)
		if err != nil {
			return nil, fmt.Errorf("%w: row %d: %v", ErrBill, n+1, err)
		}
		rows = append(rows, r)
	}
	if err := checkTrailer(trailer, rows); err != nil {
		return nil, err
	}
	return rows, nil
}

func parseRow(rec []string, idx map[string]int) (BillRow, error) {
	get := func(name string) string {
		if i, ok := idx[name]; ok && i < len(rec) {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	amount := func(name string) (int64, error) {
		if v := get(name); v != "" {
			return ParseYuan(v)
		}
		return 0, nil
	}
	r := BillRow{TradeNo: get("支付宝交易号"), OutTradeNo: get("商户订单号"), Type: get("业务类型"),
		Subject: get("商品名称"), Created: get("创建时间"), Finished: get("完成时间"), Buyer: get("对方账户"),
		OutRequestNo: get("退款批次号/请求号"), Remark: get("备注")}
	var err error
	if r.OrderAmount, err = amount("订单金额（元）"); err != nil {
		return r, err
	}
	if r.Received, err = amount("商家实收（元）"); err != nil {
		return r, err
	}
	if r.ServiceFee, err = amount("服务费（元）"); err != nil {
		return r, err
	}
	if r.OutTradeNo == "" || (r.Type != BillTrade && r.Type != BillRefund) {
		return r, fmt.Errorf("no 商户订单号 or unknown 业务类型 %q", r.Type)
	}
	return r, nil
}

func checkTrailer(lines []string, rows []BillRow) error {
	var nTrade, nRefund int
	var recvTrade, recvRefund int64
	for _, r := range rows {
		if r.Type == BillRefund {
			nRefund++
			recvRefund += r.Received
		} else {
			nTrade++
			recvTrade += r.Received
		}
	}
	found := false
	for _, l := range lines {
		var n int
		var amt string
		switch {
		case strings.HasPrefix(l, "#交易合计："):
			found = true
			if _, err := fmt.Sscanf(strings.TrimPrefix(l, "#交易合计："), "%d笔，商家实收共%s", &n, &amt); err != nil {
				return fmt.Errorf("%w: trailer %q", ErrBill, l)
			}
			if v, err := ParseYuan(strings.SplitN(amt, "元", 2)[0]); n != nTrade || err != nil || v != recvTrade {
				return fmt.Errorf("%w: trailer %q does not match the rows", ErrBill, l)
			}
		case strings.HasPrefix(l, "#退款合计："):
			if _, err := fmt.Sscanf(strings.TrimPrefix(l, "#退款合计："), "%d笔，商家实收退款共%s", &n, &amt); err != nil {
				return fmt.Errorf("%w: trailer %q", ErrBill, l)
			}
			if v, err := ParseYuan(strings.SplitN(amt, "元", 2)[0]); n != nRefund || err != nil || v != recvRefund {
				return fmt.Errorf("%w: trailer %q does not match the rows", ErrBill, l)
			}
		}
	}
	if !found {
		return fmt.Errorf("%w: no 交易合计 trailer (truncated file?)", ErrBill)
	}
	return nil
}
