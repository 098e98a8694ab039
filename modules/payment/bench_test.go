package payment

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/jetstream"
	"github.com/keelwork/keel/keelevents/jetstream/jstest"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/modules/payment/channel/alipay"
)

// BenchmarkCallbackIngress: verified Alipay callbacks through the ingress
// over loopback HTTP on PostgreSQL — read, RSA2 verification, checks, the
// conditional update, history, evidence and outbox row committed before
// the reply. Each callback is for its own payment order, signed before the
// clock starts, so the senders only post bytes. Reports callbacks/s, the
// signature check's cost, what the same senders reach against a handler
// that only reads the body and replies (the sender's ceiling), and the
// group commit's callbacks per transaction.
//
// KEEL_PAY_BENCH_BATCH sets payment.callback_batch (1: one transaction
// per callback, the path before the group commit), KEEL_PAY_BENCH_SENDERS
// the concurrent senders (default 64), KEEL_PAY_BENCH_DOWNSTREAM=1 runs
// the relay and consumers during the run. KEEL_PAY_BENCH_DIALECT=sqlite
// runs it on SQLite (no database CPU figure there: SQLite runs in the
// process, whose CPU includes it). KEEL_PAY_BENCH_QUIET_STATS=N adds N
// payments left pending, on tables analyzed before they were (quietStats).
func BenchmarkCallbackIngress(b *testing.B) {
	if os.Getenv("KEEL_PAY_BENCH_DIALECT") == "sqlite" {
		benchIngress(b, newTenv(moduletest.SQLite(b, testLines)))
		return
	}
	benchIngress(b, newTenv(moduletest.Postgres(b, testLines)))
}

func benchIngress[TTx any](b *testing.B, e *tenv[TTx]) {
	settings := map[string]string{}
	if v := os.Getenv("KEEL_PAY_BENCH_BATCH"); v != "" {
		settings["payment.callback_batch"] = v
	}
	senders := 64
	if v, err := strconv.Atoi(os.Getenv("KEEL_PAY_BENCH_SENDERS")); err == nil && v > 0 {
		senders = v
	}
	// The ingress alone by default: its events are committed to the
	// outbox and published later (BenchmarkLedgerConsumer measures the
	// consumers). KEEL_PAY_BENCH_DOWNSTREAM=1 runs the relay and the
	// ledger and orders consumers beside it, on the in-database bus.
	downstream := os.Getenv("KEEL_PAY_BENCH_DOWNSTREAM") == "1"
	e.start(b, startOpts{noSweep: true, settings: settings, noRelay: !downstream})
	ctx := context.Background()
	cfg := e.sim.Config(channel.KindAlipay)
	// The payment orders, seeded in one statement each table (creating
	// them one by one is not what is measured).
	now := time.Now().UTC()
	seeds := []string{
		`INSERT INTO pay_order (id, amount_minor, currency, state, payment_no, paid_event, created_at)
		 SELECT 'OBENCH' || lpad(i::text, 8, '0'), 128800, 'CNY', 'awaiting_payment', NULL, NULL, $1::timestamptz
		 FROM generate_series(0, $2 - 1) AS i`,
		`INSERT INTO pay_payment (payment_no, order_id, channel, merchant_id, app_id, amount_minor, currency, state,
		                          expires_at, query_after, created_at, updated_at)
		 SELECT 'BENCH' || lpad(i::text, 8, '0'), 'OBENCH' || lpad(i::text, 8, '0'), 'alipay', $3, $4, 128800, 'CNY',
		        'pending', $1::timestamptz + interval '1 hour', $1::timestamptz + interval '1 hour', $1, $1
		 FROM generate_series(0, $2 - 1) AS i`,
		`INSERT INTO pay_payment_history (payment_no, version, from_state, to_state, reason, actor, at)
		 SELECT 'BENCH' || lpad(i::text, 8, '0'), 1, '', 'pending', 'created', 'bench', $1
		 FROM generate_series(0, $2 - 1) AS i`,
	}
	if e.DB.Dialect() == "sqlite" {
		const seq = `WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < ?2 - 1) `
		seeds = []string{
			seq + `INSERT INTO pay_order (id, amount_minor, currency, state, payment_no, paid_event, created_at)
			 SELECT printf('OBENCH%08d', i), 128800, 'CNY', 'awaiting_payment', NULL, NULL, ?1 FROM s`,
			seq + `INSERT INTO pay_payment (payment_no, order_id, channel, merchant_id, app_id, amount_minor, currency, state,
			                          expires_at, query_after, created_at, updated_at)
			 SELECT printf('BENCH%08d', i), printf('OBENCH%08d', i), 'alipay', ?3, ?4, 128800, 'CNY', 'pending', ?5, ?5, ?1, ?1 FROM s`,
			seq + `INSERT INTO pay_payment_history (payment_no, version, from_state, to_state, reason, actor, at)
			 SELECT printf('BENCH%08d', i), 1, '', 'pending', 'created', 'bench', ?1 FROM s`,
		}
	}
	if n, _ := strconv.Atoi(os.Getenv("KEEL_PAY_BENCH_QUIET_STATS")); n > 0 {
		quietStats(b, e, n, cfg.MerchantID, cfg.AppID)
	}
	for i, q := range seeds {
		args := []any{now, b.N}
		if i == 1 {
			args = append(args, cfg.MerchantID, cfg.AppID)
			if e.DB.Dialect() == "sqlite" {
				args = append(args, now.Add(time.Hour))
			}
		}
		if _, err := e.DB.Exec(ctx, q, args...); err != nil {
			b.Fatal(err)
		}
	}
	bodies := make([][]byte, b.N)
	for i := range bodies {
		no := fmt.Sprintf("BENCH%08d", i)
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
	// The senders' ceiling: the same posts to a handler that reads the
	// body and replies, nothing else.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte("success"))
	}))
	defer echo.Close()
	cpu0 := procCPU()
	ceiling := sendAll(b, echo.URL, bodies, senders)
	echoCPU := procCPU() - cpu0
	pg0 := time.Duration(0)
	if e.DB.Dialect() == "postgres" {
		pg0 = e.pgCPU(b)
	}
	cpu0 = procCPU()
	b.ResetTimer()
	el := sendAll(b, e.ingress.URL+CallbackPath(channel.KindAlipay), bodies, senders)
	b.StopTimer()
	ingressCPU, pgCPU := procCPU()-cpu0, time.Duration(0)
	if e.DB.Dialect() == "postgres" {
		pgCPU = e.pgCPU(b) - pg0
	}
	if n := e.Count(b, "SELECT COUNT(*) FROM pay_payment WHERE state = 'paid'"); n != int64(b.N) {
		b.Fatalf("%d payments paid, want %d", n, b.N)
	}
	gs := e.m.GroupStats()
	b.ReportMetric(float64(b.N)/el.Seconds(), "callbacks/s")
	b.ReportMetric(float64(verify.Microseconds()), "verify-µs/callback")
	b.ReportMetric(float64(b.N)/ceiling.Seconds(), "sender-ceiling/s")
	// CPU time per callback, which the machine's load does not inflate as
	// it does wall time: this process (senders included) and the
	// database's backends serving it; the echo run's CPU is what the
	// senders and the HTTP exchange alone cost.
	perCB := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	b.ReportMetric(perCB(ingressCPU), "proc-cpu-µs/callback")
	b.ReportMetric(perCB(echoCPU), "echo-cpu-µs/post")
	if e.DB.Dialect() == "postgres" {
		b.ReportMetric(perCB(pgCPU), "pg-cpu-µs/callback")
	}
	if gs.Batches > 0 {
		b.ReportMetric(float64(gs.Callbacks)/float64(gs.Batches), "callbacks/txn")
		b.ReportMetric(float64(gs.Alone), "alone")
	}
}

// quietStats seeds n payments that stay pending through the run (a day's
// open payments, which get no callback here), with the tables analyzed
// before they became pending: statistics taken on a quiet night, when
// every payment had settled. It is the set-up of TestPlansAfterAnalyze at
// the scale of a busy day, measured from the channel's side: a callback
// whose statement walks every pending payment to find the one it names
// costs as much as that backlog. PostgreSQL only (SQLite is never
// analyzed by Keel).
func quietStats[TTx any](b *testing.B, e *tenv[TTx], n int, merchant, app string) {
	if e.DB.Dialect() != "postgres" {
		b.Fatal("KEEL_PAY_BENCH_QUIET_STATS needs PostgreSQL")
	}
	ctx := context.Background()
	for _, st := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO pay_order (id, amount_minor, currency, state, created_at)
		  SELECT 'OOPEN' || lpad(i::text, 8, '0'), 128800, 'CNY', 'awaiting_payment', now() FROM generate_series(0, $1 - 1) AS i`,
			[]any{n}},
		{`INSERT INTO pay_payment (payment_no, order_id, channel, merchant_id, app_id, amount_minor, currency, state,
		                           expires_at, query_after, created_at, updated_at)
		  SELECT 'OPEN' || lpad(i::text, 8, '0'), 'OOPEN' || lpad(i::text, 8, '0'), 'alipay', $2, $3,
		         128800, 'CNY', 'manual', now() + interval '1 hour', now() + interval '1 hour', now(), now()
		  FROM generate_series(0, $1 - 1) AS i`,
			[]any{n, merchant, app}},
	} {
		if _, err := e.DB.Exec(ctx, st.sql, st.args...); err != nil {
			b.Fatal(err)
		}
	}
	for _, q := range []string{`ANALYZE pay_order`, `ANALYZE pay_payment`, `ANALYZE pay_payment_history`,
		`UPDATE pay_payment SET state = 'pending' WHERE payment_no LIKE 'OPEN%'`} {
		if _, err := e.DB.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
}

// procCPU is this process's user and system CPU time.
func procCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pgCPU is the CPU time of the database backends connected to the test
// database (Linux /proc; 0 where it cannot be read).
func (e *tenv[TTx]) pgCPU(b *testing.B) time.Duration {
	rows, err := e.DB.Query(context.Background(), "SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
	pids, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (int64, error) {
		var pid int64
		return pid, r.Scan(&pid)
	})
	if err != nil {
		b.Fatal(err)
	}
	var ticks int64
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: utime and stime
		// are the 12th and 13th.
		f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			ticks += u + s
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// sendAll posts every body once from n concurrent senders and returns the
// time it took; each reply must be Alipay's "success".
func sendAll(b *testing.B, url string, bodies [][]byte, n int) time.Duration {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: n}}
	defer client.CloseIdleConnections()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 16)
			for {
				i := next.Add(1) - 1
				if i >= int64(len(bodies)) {
					return
				}
				resp, err := client.Post(url, "application/x-www-form-urlencoded", bytes.NewReader(bodies[i]))
				if err != nil {
					b.Error(err)
					return
				}
				k, _ := io.ReadFull(resp.Body, buf[:7])
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if string(buf[:k]) != "success" {
					b.Errorf("reply %q", buf[:k])
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// BenchmarkLedgerConsumer: a backlog of payment success events consumed by
// the ledger through the inbox (bus, inbox batch, balanced entries, the
// balances once per batch) on PostgreSQL, with the orders consumer running
// beside it. Reports events/s from the consumers' start to the last entry
// (the relay publishing the backlog included). The bus is JetStream
// (KEEL_TEST_NATS_URL); KEEL_PAY_BENCH_BUS=db uses the in-database bus.
func BenchmarkLedgerConsumer(b *testing.B) {
	e := newTenv(moduletest.Postgres(b, testLines))
	ctx := context.Background()
	var bus keelevents.Bus
	var err error
	// The partition count bounds an ordered consumer's parallelism (one
	// delivery in flight per partition): KEEL_PAY_BENCH_PARTITIONS sets it
	// to measure how the backlog's drain scales with it.
	parts := 16
	if v, perr := strconv.Atoi(os.Getenv("KEEL_PAY_BENCH_PARTITIONS")); perr == nil && v > 0 {
		parts = v
	}
	if os.Getenv("KEEL_PAY_BENCH_BUS") == "db" {
		bus, err = keelevents.NewDatabaseBus(e.DB, nil)
	} else {
		// The bus a deployment carries a backlog on; the in-database bus
		// orders by partition with one delivery in flight per partition.
		ns := fmt.Sprintf("ledg%d", time.Now().UnixNano()%1_000_000_000)
		url := jstest.ServerURL(b)
		if os.Getenv("KEEL_PAY_BENCH_NATS") == "embedded" {
			// In the benchmark's process, so that a CPU profile shows the
			// server's share of the work beside the client's.
			url = jstest.Embedded(b)
		}
		// KEEL_PAY_BENCH_WINDOW=1 turns the ledger's window off (one event
		// in flight per partition), to compare on one server.
		win, _ := strconv.Atoi(os.Getenv("KEEL_PAY_BENCH_WINDOW"))
		bus, err = jetstream.New(ctx, jetstream.Config{URL: url, Partitions: parts, Namespace: ns,
			MaxAge: time.Hour, InactiveThreshold: 5 * time.Minute, MaxWindow: win})
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bus.Close() })
	ev, err := keelevents.New(e.DB, bus, &keelevents.Config{Partitions: parts, StatsInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	// The backlog, emitted before any consumer runs, a thousand events a
	// statement (the seeding is not what is measured).
	const batch = 1000
	for i := 0; i < b.N; i += batch {
		evs := make([]keelevents.Event, 0, batch)
		for j := i; j < min(i+batch, b.N); j++ {
			no := fmt.Sprintf("LEDG%08d", j)
			body, _ := json.Marshal(PaymentEvent{PaymentNo: no, OrderID: "O" + no, Channel: "wechat", MerchantID: "m",
				TransactionID: "t" + no, AmountMinor: 128800, Currency: "CNY", At: time.Now().UTC()})
			evs = append(evs, keelevents.Event{Topic: TopicPaid, ID: "payment:" + no + ":succeeded", Key: no, Payload: body})
		}
		if err := e.DB.InTx(ctx, func(tx keelsql.Tx[pgxTx]) error { return ev.EmitManyTx(ctx, tx, evs) }); err != nil {
			b.Fatal(err)
		}
	}
	e.ev = ev
	e.start2(b, ev)
	b.ResetTimer()
	start := time.Now()
	// A benchmark's poll of its own progress: rarely enough on a large
	// backlog that counting the journal is no load of its own.
	poll := 20 * time.Millisecond
	if b.N > 100_000 {
		poll = time.Second
	}
	// The samples give the slowest 10 s of the drain as well as its
	// average: a sustained rate, not one a fast start carries.
	type sample struct {
		at time.Duration
		n  int64
	}
	var samples []sample
	for {
		n := e.Count(b, "SELECT COUNT(*) FROM pay_journal")
		samples = append(samples, sample{time.Since(start), n})
		if n >= int64(b.N) {
			break
		}
		time.Sleep(poll)
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "events/s")
	slowest := 0.0
	for i, j := 0, 0; j < len(samples); j++ {
		for i+1 < j && samples[j].at-samples[i+1].at >= 10*time.Second {
			i++
		}
		if d := samples[j].at - samples[i].at; d >= 10*time.Second {
			r := float64(samples[j].n-samples[i].n) / d.Seconds()
			if slowest == 0 || r < slowest {
				slowest = r
			}
		}
	}
	if slowest > 0 {
		b.ReportMetric(slowest, "slowest-10s-events/s")
	}
}

// BenchmarkReconciliation: the four-way channel reconciler over one day of
// N paid payments on PostgreSQL — N payments with their paid orders and
// capture entries, and a bill of N lines that agree — reporting the run's
// wall time, the process's peak heap during it (sampled every 20 ms), and
// the CPU time of the process and of the database backends serving it.
// N is KEEL_PAY_BENCH_RECON_N (default 100,000).
func BenchmarkReconciliation(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("KEEL_PAY_BENCH_RECON_N")); err == nil && v > 0 {
		n = v
	}
	e := newTenv(moduletest.Postgres(b, testLines))
	e.start(b, startOpts{noSweep: true})
	ctx := context.Background()
	cfg := e.sim.Config(channel.KindWeChat)
	now := time.Now().UTC().Add(-time.Minute)
	day := now.In(billZone).Format(time.DateOnly)
	const no = `'RECB' || lpad(i::text, 9, '0')`
	for _, q := range []string{
		`INSERT INTO pay_order (id, amount_minor, currency, state, payment_no, paid_event, created_at, paid_at)
		 SELECT 'O' || ` + no + `, 128800, 'CNY', 'paid', ` + no + `, 'payment:' || ` + no + ` || ':succeeded', $1, $1
		 FROM generate_series(1, $2) AS i`,
		`INSERT INTO pay_payment (payment_no, order_id, channel, merchant_id, app_id, amount_minor, currency, state,
		                          transaction_id, version, source, expires_at, query_after, paid_at, created_at, updated_at)
		 SELECT ` + no + `, 'O' || ` + no + `, 'wechat', $3, '', 128800, 'CNY', 'paid', 'T' || ` + no + `, 2, 'callback',
		        $1, $1, $1, $1, $1
		 FROM generate_series(1, $2) AS i`,
		`INSERT INTO pay_journal (entry_key, subject, action, payment_no, refund_no, event_id, amount_minor, currency, posted_at)
		 SELECT 'payment:' || ` + no + ` || ':capture', 'payment:' || ` + no + `, 'capture', ` + no + `, '',
		        'payment:' || ` + no + ` || ':succeeded', 128800, 'CNY', $1
		 FROM generate_series(1, $2) AS i`,
		`INSERT INTO pay_bill_line (channel, day, event, merchant_id, payment_no, transaction_id, refund_no, refund_id,
		                            amount_minor, fee_minor, currency, state, at, fetched_at)
		 SELECT 'wechat', $4, 'payment', $3, ` + no + `, 'T' || ` + no + `, '', '', 128800, 773, 'CNY', 'paid', $1, $1
		 FROM generate_series(1, $2) AS i`,
		`ANALYZE`,
	} {
		var args []any
		switch {
		case strings.Contains(q, "pay_order"), strings.Contains(q, "pay_journal"):
			args = []any{now, n}
		case strings.Contains(q, "pay_payment"):
			args = []any{now, n, cfg.MerchantID}
		case strings.Contains(q, "pay_bill_line"):
			args = []any{now, n, cfg.MerchantID, day}
		}
		if _, err := e.DB.Exec(ctx, q, args...); err != nil {
			b.Fatalf("%.60s: %v", q, err)
		}
	}
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	cpu0, pg0 := procCPU(), e.pgCPU(b)
	b.ResetTimer()
	start := time.Now()
	r, err := e.recon.Run(keel.WithActor(ctx, "operator:bench"), ReconChannel, time.Now())
	el := time.Since(start)
	b.StopTimer()
	// CPU time, which the machine's load does not inflate as it does wall
	// time: this process's and the database backends' serving it.
	procS, pgS := (procCPU() - cpu0).Seconds(), (e.pgCPU(b) - pg0).Seconds()
	close(stop)
	<-sampled
	if err != nil {
		b.Fatal(err)
	}
	if r.State != "succeeded" || r.Compared < int64(n) {
		b.Fatalf("run %s, compared %d of %d: %s", r.State, r.Compared, n, r.Error)
	}
	b.ReportMetric(el.Seconds(), "run-s")
	b.ReportMetric(float64(n)/el.Seconds(), "transactions/s")
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(base.HeapAlloc)/(1<<20), "heap-before-MiB")
	b.ReportMetric(float64(r.Found), "discrepancies")
	b.ReportMetric(procS, "proc-cpu-s")
	b.ReportMetric(pgS, "pg-cpu-s")
}
