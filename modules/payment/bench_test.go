package payment

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/modules/payment/channel/alipay"
)

// BenchmarkCallbackIngress: verified Alipay callbacks through the ingress
// over loopback HTTP on PostgreSQL — read, RSA2 verification, checks, the
// conditional update, evidence and outbox row in one transaction, the
// reply. Reports callbacks/s and the signature check's share.
func BenchmarkCallbackIngress(b *testing.B) {
	e := pgEnv(b)
	e.start(b, startOpts{noSweep: true})
	ctx := context.Background()
	cfg := e.sim.Config(channel.KindAlipay)
	bodies := make([][]byte, b.N)
	for i := range bodies {
		no := fmt.Sprintf("BENCH%08d", i)
		if _, err := e.m.CreatePayment(ctx, NewPayment{PaymentNo: no, OrderID: "O" + no, Channel: "alipay", AmountMinor: 128800, Currency: "CNY"}); err != nil {
			b.Fatal(err)
		}
		p := url.Values{"notify_time": {alipay.FormatTime(time.Now())}, "notify_type": {"trade_status_sync"}, "notify_id": {"n" + no},
			"app_id": {cfg.AppID}, "charset": {"utf-8"}, "version": {"1.0"}, "trade_no": {"2026" + no}, "out_trade_no": {no},
			"seller_id": {cfg.MerchantID}, "trade_status": {"TRADE_SUCCESS"}, "total_amount": {"1288.00"},
			"gmt_payment": {alipay.FormatTime(time.Now())}}
		bodies[i] = e.sim.SignAlipay(p, nil)
	}
	mc, _ := e.m.merchant(channel.KindAlipay)
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	t0 := time.Now()
	for i := 0; i < min(b.N, 200); i++ {
		if _, err := mc.Channel.Verifier.Verify(ctx, h, bodies[i]); err != nil {
			b.Fatal(err)
		}
	}
	verify := time.Since(t0) / time.Duration(min(b.N, 200))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var next atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) - 1
			resp, err := client.Post(e.ingress.URL+CallbackPath(channel.KindAlipay), "application/x-www-form-urlencoded", strings.NewReader(string(bodies[i])))
			if err != nil {
				b.Error(err)
				return
			}
			buf := make([]byte, 16)
			n, _ := resp.Body.Read(buf)
			resp.Body.Close()
			if string(buf[:n]) != "success" {
				b.Errorf("reply %q", buf[:n])
				return
			}
		}
	})
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "callbacks/s")
	b.ReportMetric(float64(verify.Microseconds()), "verify-µs/callback")
}

// BenchmarkLedgerConsumer: a backlog of payment success events consumed by
// the ledger through the inbox (bus, inbox row, balanced entry, two
// balances) on PostgreSQL. Reports events/s from the first delivery to the
// last entry.
func BenchmarkLedgerConsumer(b *testing.B) {
	e := pgEnv(b)
	ctx := context.Background()
	bus, err := keelevents.NewDatabaseBus(e.db, nil)
	if err != nil {
		b.Fatal(err)
	}
	ev, err := keelevents.New(e.db, bus, &keelevents.Config{Partitions: 16, StatsInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	// The backlog, emitted before any consumer runs.
	const batch = 500
	for i := 0; i < b.N; i += batch {
		err := e.db.InTx(ctx, func(tx keelsql.Tx[pgxTx]) error {
			for j := i; j < min(i+batch, b.N); j++ {
				no := fmt.Sprintf("LEDG%08d", j)
				body, _ := json.Marshal(PaymentEvent{PaymentNo: no, OrderID: "O" + no, Channel: "wechat", MerchantID: "m",
					TransactionID: "t" + no, AmountMinor: 128800, Currency: "CNY", At: time.Now().UTC()})
				if err := ev.EmitTx(ctx, tx, keelevents.Event{Topic: TopicPaid, ID: "payment:" + no + ":succeeded", Key: no, Payload: body}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	e.ev = ev
	e.start2(b, ev)
	b.ResetTimer()
	start := time.Now()
	for {
		if n := e.count(b, "SELECT COUNT(*) FROM pay_journal"); n >= int64(b.N) {
			break
		}
		time.Sleep(20 * time.Millisecond) // a benchmark's poll of its own progress
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "events/s")
}
