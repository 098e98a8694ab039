package wechatpay

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the fuzz seed corpus")

func sampleRows() []BillRow {
	return []BillRow{
		{TradeTime: "2026-07-14 18:00:00", AppID: "wxd678efh567hg6787", MchID: "1900000109", TransactionID: "4200000001202607140000000001",
			OutTradeNo: "T20260714001", OpenID: "oUpF8u", TradeType: "JSAPI", TradeState: "SUCCESS", BankType: "CMB_DEBIT", Currency: "CNY",
			SettlementTotal: 128800, Body: "商品,含逗号", Fee: 773, Rate: "0.60%", OrderAmount: 128800},
		{TradeTime: "2026-07-14 19:00:00", AppID: "wxd678efh567hg6787", MchID: "1900000109", TransactionID: "4200000001202607140000000001",
			OutTradeNo: "T20260714001", TradeType: "JSAPI", TradeState: "REFUND", Currency: "CNY", RefundID: "50300000012026071400000001",
			OutRefundNo: "T20260714001-R1", RefundAmount: 28800, RefundType: "ORIGINAL", RefundStatus: "SUCCESS", Fee: -173, RefundApplied: 28800, Rate: "0.60%"},
	}
}

func TestBillRoundTrip(t *testing.T) {
	file := WriteBill(sampleRows())
	if !strings.HasPrefix(string(file), "交易时间,公众账号ID,商户号") || !strings.Contains(string(file), "\r\n`2026-07-14 18:00:00,`wxd678efh567hg6787,`") {
		t.Fatalf("file does not look like the published layout:\n%s", file)
	}
	rows, err := ParseBill(file)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rows, sampleRows()) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", rows, sampleRows())
	}
	truncated := file[:strings.Index(string(file), "总交易单数")]
	if _, err := ParseBill(truncated); err == nil {
		t.Fatal("a bill without its summary parsed")
	}
	wrongTotal := strings.Replace(string(file), "`2,`1288.00", "`2,`1288.01", 1)
	if _, err := ParseBill([]byte(wrongTotal)); err == nil {
		t.Fatal("a bill whose summary disagrees with its rows parsed")
	}
	if *updateSeeds {
		seed(t, "FuzzParseBill", "valid", file)
		seed(t, "FuzzParseBill", "empty", WriteBill(nil))
		seed(t, "FuzzParseBill", "truncated", truncated)
	}
}

func TestAuthRoundTrip(t *testing.T) {
	a := Auth{MchID: "1900000109", NonceStr: "593BEC0C930BF1AFEB40B4A08C8FB242", Signature: "c2ln", Timestamp: "1554208460", SerialNo: "1DDE55AD98ED71D6EDD4A4A16996DE7B47773A8C"}
	got, err := ParseAuth(a.String())
	if err != nil || got != a {
		t.Fatalf("ParseAuth(%q) = %+v, %v", a.String(), got, err)
	}
	if *updateSeeds {
		seed(t, "FuzzParseAuth", "valid", []byte(a.String()))
	}
}

func TestYuan(t *testing.T) {
	for s, want := range map[string]int64{"1288.00": 128800, "0.5": 50, "-7.73": -773, "12": 1200} {
		if got, err := ParseYuan(s); err != nil || got != want {
			t.Errorf("ParseYuan(%q) = %d, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "1.234", "1e3", "١٢", "--1", "1,00", "9999999999999999.00"} {
		if _, err := ParseYuan(s); err == nil {
			t.Errorf("ParseYuan(%q) accepted", s)
		}
	}
}

func seed(t *testing.T, target, name string, data []byte) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte("go test fuzz v1\n[]byte("+strconv.Quote(string(data))+")\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// FuzzParseBill: no file makes the parser panic, and what it accepts
// survives being written and read again unchanged.
func FuzzParseBill(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := ParseBill(data)
		if err != nil {
			return
		}
		again, err := ParseBill(WriteBill(rows))
		if err != nil {
			t.Fatalf("rewritten bill does not parse: %v", err)
		}
		if len(rows) == 0 && len(again) == 0 {
			return
		}
		if !reflect.DeepEqual(rows, again) {
			t.Fatalf("rewritten bill differs:\n%+v\n%+v", rows, again)
		}
	})
}

// FuzzParseAuth: no header makes the parser panic; what it accepts
// renders back to an equal header.
func FuzzParseAuth(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := ParseAuth(string(data))
		if err != nil {
			return
		}
		b, err := ParseAuth(a.String())
		if err != nil || a != b {
			t.Fatalf("%+v rendered as %q parses to %+v, %v", a, a.String(), b, err)
		}
	})
}

// FuzzDecrypt: no resource makes decryption panic.
func FuzzDecrypt(f *testing.F) {
	ct, _ := Encrypt("0123456789abcdefghijABCDEFGHIJ01", "fixturenonce", "transaction", []byte(`{"out_trade_no":"T1"}`))
	f.Add("fixturenonce", "transaction", ct)
	f.Fuzz(func(t *testing.T, nonce, ad, ct string) {
		_, _ = Decrypt("0123456789abcdefghijABCDEFGHIJ01", nonce, ad, ct)
	})
}

func TestDecryptTampering(t *testing.T) {
	const key = "0123456789abcdefghijABCDEFGHIJ01"
	ct, err := Encrypt(key, "fixturenonce", "transaction", []byte(`{"out_trade_no":"T1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := Decrypt(key, "fixturenonce", "transaction", ct); err != nil || string(pt) != `{"out_trade_no":"T1"}` {
		t.Fatalf("decrypt: %q, %v", pt, err)
	}
	for _, c := range [][3]string{{"fixturenonc3", "transaction", ct}, {"fixturenonce", "transactioN", ct}, {"fixturenonce", "transaction", "A" + ct[1:]}} {
		if _, err := Decrypt(key, c[0], c[1], c[2]); err == nil {
			t.Errorf("tampered %q decrypted", c)
		}
	}
	if *updateSeeds {
		dir := filepath.Join("testdata", "fuzz", "FuzzDecrypt")
		_ = os.MkdirAll(dir, 0o755)
		s := "go test fuzz v1\nstring(\"fixturenonce\")\nstring(\"transaction\")\nstring(" + strconv.Quote(ct) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, "valid"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
