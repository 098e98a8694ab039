package alipay

import (
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the fuzz seed corpus")

func TestSignContent(t *testing.T) {
	p := url.Values{"b": {"2"}, "a": {"1 + 1"}, "sign": {"x"}, "sign_type": {"RSA2"}, "empty": {""}, "c": {"中文"}}
	if got, want := SignContent(p, "sign", "sign_type"), "a=1 + 1&b=2&c=中文"; got != want {
		t.Fatalf("notify content %q, want %q", got, want)
	}
	if got, want := SignContent(p, "sign"), "a=1 + 1&b=2&c=中文&sign_type=RSA2"; got != want {
		t.Fatalf("request content %q, want %q", got, want)
	}
}

func TestSplitResponseKeepsBytes(t *testing.T) {
	body := []byte(`{"alipay_trade_query_response":{"code":"10000", "msg":"Success","total_amount":"88.88","url":"http:\/\/x"},"sign":"abc"}`)
	node, sign, err := SplitResponse(body, "alipay.trade.query")
	if err != nil || sign != "abc" || string(node) != `{"code":"10000", "msg":"Success","total_amount":"88.88","url":"http:\/\/x"}` {
		t.Fatalf("node %s sign %q err %v", node, sign, err)
	}
	if *updateSeeds {
		seed(t, "FuzzSplitResponse", "valid", body)
		seed(t, "FuzzSplitResponse", "error", []byte(`{"error_response":{"code":"40002","msg":"Invalid Arguments","sub_code":"isv.invalid-app-id"}}`))
	}
}

func sampleRows() []BillRow {
	return []BillRow{
		{TradeNo: "2026071422001404010000000001", OutTradeNo: "T20260714001", Type: BillTrade, Subject: "Keel 订单, 含逗号",
			Created: "2026-07-14 17:59:00", Finished: "2026-07-14 18:00:00", Buyer: "159****5620", OrderAmount: 128800, Received: 128800, ServiceFee: -773},
		{TradeNo: "2026071422001404010000000001", OutTradeNo: "T20260714001", Type: BillRefund, Subject: "Keel 订单",
			Created: "2026-07-14 17:59:00", Finished: "2026-07-14 19:00:00", Buyer: "159****5620", OrderAmount: -28800, Received: -28800,
			OutRequestNo: "T20260714001-R1", ServiceFee: 173},
	}
}

func TestBillRoundTrip(t *testing.T) {
	z, err := WriteBill("20881021462251350156", "2026-07-14", sampleRows(), "2026-07-15 09:00:00")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := ParseBill(z)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rows, sampleRows()) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", rows, sampleRows())
	}
	if _, err := ParseBill(z[:len(z)/2]); err == nil {
		t.Fatal("half a zip parsed")
	}
	if *updateSeeds {
		seed(t, "FuzzParseBill", "valid", z)
		empty, _ := WriteBill("20881021462251350156", "2026-07-14", nil, "2026-07-15 09:00:00")
		seed(t, "FuzzParseBill", "empty", empty)
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

// FuzzParseBill: no download makes the bill parser panic (zip, GBK, CSV
// and trailer), and what it accepts survives a rewrite unchanged.
func FuzzParseBill(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := ParseBill(data)
		if err != nil {
			return
		}
		z, err := WriteBill("2088", "2026-07-14", rows, "2026-07-15 09:00:00")
		if err != nil {
			return // a field GBK cannot hold
		}
		again, err := ParseBill(z)
		if err != nil {
			t.Fatalf("rewritten bill does not parse: %v", err)
		}
		if len(rows) != len(again) {
			t.Fatalf("rewritten bill has %d rows, had %d", len(again), len(rows))
		}
	})
}

// FuzzSplitResponse: no gateway answer makes the splitter panic.
func FuzzSplitResponse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _, _ = SplitResponse(data, "alipay.trade.query")
	})
}
