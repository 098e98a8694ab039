package alarm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/keelwork/keel/module/moduletest"
)

// quietStats opens n alarm instances of other devices on tables analyzed
// while they had all recovered (a quiet hour before a wide outage): the
// set-up of TestPlansAfterAnalyze at a storm's scale, measured from the
// devices' side. An instance update that walks every open instance to find
// the one it names makes each reading of the storm cost as much as all of
// them.
func quietStats(b *testing.B, e *moduletest.Env[pgx.Tx], n int) {
	ctx := context.Background()
	if _, err := e.DB.Exec(ctx, `INSERT INTO alarm_instance (id, device, rule, rule_version, state, severity, peak_severity,
		     peak_value, first_value, last_value, count, first_at, last_at, boot, first_seq, last_seq, received_at, ver)
		 SELECT 'quiet' || g, 'quiet' || g, 'r' || (g % 10), 1, 'recovered', 1, 1, 0, 0, 0, 1, now(), now(), 1, 1, 1, now(), 1
		 FROM generate_series(1, $1) g`, n); err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{`ANALYZE alarm_instance`, `ANALYZE alarm_notice`,
		`UPDATE alarm_instance SET state = 'firing' WHERE device LIKE 'quiet%'`} {
		if _, err := e.DB.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAlarmMQTTIngest offers telemetry over MQTT into Mosquitto (a
// broker of its own: max_queued_messages 0, max_inflight_messages
// ALARM_BENCH_INFLIGHT, default 1,000) at
// ALARM_BENCH_RATE messages/s (default 10,000) for ALARM_BENCH_SECONDS
// (default 15) from a gateway-fault storm (every reading over the warn
// threshold), with a severe reading every 100 ms; PostgreSQL, four
// consumers in the shared subscription. ALARM_BENCH_PUBLISHERS paho clients
// (default 8) publish at QoS 1 with up to 1,000 messages each waiting for
// their PUBACK, topics built beforehand and payloads encoded without
// reflection, paced against the wall clock (a late publisher catches up
// rather than falling behind for good). It reports the offered rate, the
// sustained ingest rate (persisted and acknowledged), the severe end-to-end
// p50/p99 (publish to the webhook receiver), the ordinary backlog left, the
// compression ratio and the process's peak heap. A stall (no message
// persisted for 20 s while some are outstanding) writes a goroutine dump
// and the database's locks and sessions to ALARM_BENCH_DUMP (a directory,
// default the test's temporary one) and fails. Run with -benchtime=1x.
// ALARM_BENCH_QUIET_STATS=N first opens N instances of other devices on
// statistics taken while none was open (quietStats).
func BenchmarkAlarmMQTTIngest(b *testing.B) {
	rate := envInt("ALARM_BENCH_RATE", 10000)
	secs := envInt("ALARM_BENCH_SECONDS", 15)
	devices := envInt("ALARM_BENCH_DEVICES", 2000)
	pubs := envInt("ALARM_BENCH_PUBLISHERS", 8)
	consumers := envInt("ALARM_BENCH_CONSUMERS", 4)
	broker := startMosquittoInflight(b, envInt("ALARM_BENCH_INFLIGHT", 1000))
	e := moduletest.Postgres(b, Lines)
	r := start(b, e, map[string]string{"alarm.mqtt_url": broker.url(), "alarm.consumers": strconv.Itoa(consumers), "alarm.pool_size": "12",
		"alarm.reserved_conns": "3", "alarm.group_wait": "2s", "alarm.group_interval": "2s",
		"test.real_clock": "1", "alarm.low_water": "1000000", "alarm.high_water": "2000000", "alarm.storm_water": "3000000"})
	ctx := context.Background()
	if n := envInt("ALARM_BENCH_QUIET_STATS", 0); n > 0 {
		quietStats(b, e, n)
	}
	topics := make([]string, devices)
	for i := 0; i < devices; i++ {
		gw, id := FleetDevice(i)
		topics[i] = Topic(gw, id)
		if err := r.m.RegisterDevice(ctx, id, "", ""); err != nil {
			b.Fatal(err)
		}
	}
	const severeDevices = 200
	for i := 0; i < severeDevices; i++ {
		if err := r.m.RegisterDevice(ctx, fmt.Sprintf("sev%03d", i), "", ""); err != nil {
			b.Fatal(err)
		}
	}
	var peakHeap atomic.Uint64
	stopMem := make(chan struct{})
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peakHeap.Load() {
				peakHeap.Store(ms.HeapInuse)
			}
			select {
			case <-stopMem:
				return
			case <-t.C:
			}
		}
	}()
	clients := make([]mqtt.Client, pubs)
	for p := range clients {
		opts := mqtt.NewClientOptions().AddBroker(broker.url()).SetClientID(fmt.Sprintf("bench-pub-%d", p)).SetCleanSession(true).
			SetOrderMatters(false).SetWriteTimeout(30 * time.Second)
		c := mqtt.NewClient(opts)
		if t := c.Connect(); !t.WaitTimeout(15*time.Second) || t.Error() != nil {
			b.Fatalf("publisher %d connecting: %v", p, t.Error())
		}
		clients[p] = c
		defer c.Disconnect(250)
	}
	persisted := func() int64 {
		return int64(testutil.ToFloat64(r.m.counters.vec.WithLabelValues(StageIngest, "persisted")) +
			testutil.ToFloat64(r.m.counters.vec.WithLabelValues(StageIngest, "duplicate")))
	}
	var published atomic.Int64
	var sevSent sync.Map
	stallErr := make(chan string, 1)
	stopWatch := make(chan struct{})
	go r.watchStall(stopWatch, stallErr, persisted, func() int64 { return published.Load() })
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	perPub := float64(rate) / float64(pubs)
	for p := 0; p < pubs; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[p]
			const window = 1000
			inflight := make([]mqtt.Token, window)
			buf := make([]byte, 0, 128)
			sent, seq := 0, int64(0)
			for {
				el := time.Since(start)
				if el >= time.Duration(secs)*time.Second {
					break
				}
				due := int(perPub * el.Seconds())
				if sent >= due {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				for ; sent < due; sent++ {
					if t := inflight[sent%window]; t != nil {
						t.Wait()
					}
					// Device d of publisher p: each publisher walks its own
					// devices, so a device's sequence only grows.
					k := sent*pubs + p
					d := k % devices
					seq = int64(k/devices) + 1
					buf = appendSample(buf[:0], "temp", 85+float64(k%10), 1, seq, time.Now())
					inflight[sent%window] = c.Publish(topics[d], 1, false, slices.Clone(buf))
					published.Add(1)
				}
				if p == 0 {
					if i := int(el / (100 * time.Millisecond)); i < severeDevices {
						dev := fmt.Sprintf("sev%03d", i)
						if _, done := sevSent.LoadOrStore(dev, time.Now()); !done {
							buf = appendSample(buf[:0], "temp", 130, 1, 1, time.Now())
							c.Publish(Topic("gws", dev), 1, false, slices.Clone(buf))
							published.Add(1)
						}
					}
				}
			}
			for _, t := range inflight {
				if t != nil {
					t.Wait()
				}
			}
		}()
	}
	wg.Wait()
	offeredFor := time.Since(start)
	want := published.Load()
	moduletest.WaitFor(b, 10*time.Minute, "every published reading persisted", func() bool {
		select {
		case s := <-stallErr:
			b.Fatal(s)
		default:
		}
		return persisted() >= want
	})
	ingestFor := time.Since(start)
	close(stopWatch)
	backlog := r.count("SELECT count(*) FROM alarm_telemetry WHERE NOT evaluated")
	nSevere := 0
	sevSent.Range(func(any, any) bool { nSevere++; return true })
	moduletest.WaitFor(b, 5*time.Minute, "every severe notice", func() bool { return len(r.hook.received("firing")) >= nSevere })
	close(stopMem)
	b.StopTimer()
	var lat []time.Duration
	for _, nb := range r.hook.received("firing") {
		if t0, ok := sevSent.Load(nb.Members[0].Device); ok {
			r.hook.mu.Lock()
			lat = append(lat, r.hook.at[nb.Key].Sub(t0.(time.Time)))
			r.hook.mu.Unlock()
		}
	}
	slices.Sort(lat)
	// Where a severe reading's time went: publish → persisted by the
	// consumer (the broker and its queue, the publisher's window), then
	// persisted → notice at the receiver (the module and its engine job).
	var toBroker, inModule []time.Duration
	rows, err := e.DB.Query(ctx, "SELECT device, received_at FROM alarm_telemetry WHERE lane = 'severe'")
	if err != nil {
		b.Fatal(err)
	}
	recv := map[string]time.Time{}
	for rows.Next() {
		var d string
		var at time.Time
		if err := rows.Scan(&d, &at); err != nil {
			b.Fatal(err)
		}
		recv[d] = at
	}
	rows.Close()
	r.hook.mu.Lock()
	for _, nb := range r.hook.bodies {
		t0, ok := sevSent.Load(nb.Members[0].Device)
		if at, got := recv[nb.Members[0].Device]; ok && got && nb.Kind == "firing" {
			toBroker = append(toBroker, at.Sub(t0.(time.Time)))
			inModule = append(inModule, r.hook.at[nb.Key].Sub(at))
		}
	}
	r.hook.mu.Unlock()
	slices.Sort(toBroker)
	slices.Sort(inModule)
	p99 := func(l []time.Duration) float64 {
		if len(l) == 0 {
			return 0
		}
		return float64(l[min(len(l)-1, len(l)*99/100)].Milliseconds())
	}
	// Let a group flush or two happen so that the ratio has notices.
	time.Sleep(5 * time.Second)
	_ = r.m.flushCounters(ctx)
	panel := r.m.StormPanel(ctx)
	ingest := float64(want) / ingestFor.Seconds()
	b.ReportMetric(float64(want)/offeredFor.Seconds(), "offered_msgs/s")
	b.ReportMetric(ingest, "ingest_msgs/s")
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "severe_p50_ms")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Milliseconds()), "severe_p99_ms")
	b.ReportMetric(p99(toBroker), "severe_to_consumer_p99_ms")
	b.ReportMetric(p99(inModule), "severe_in_module_p99_ms")
	b.ReportMetric(float64(backlog), "ordinary_backlog")
	b.ReportMetric(panel.Compression, "compression")
	b.ReportMetric(float64(peakHeap.Load())/(1<<20), "peak_heap_MiB")
	b.Logf("last evaluation error: %v", r.m.lastEvalErr.Load())
	b.Logf("published %d in %v (offered), persisted all in %v; severe %d; backlog %d; counters %v", want, offeredFor, ingestFor, len(lat), backlog, panel.Counters)
}

// appendSample is Encode without reflection (the benchmark's publishers
// must not be what limits the offered rate).
func appendSample(b []byte, metric string, v float64, boot, seq int64, at time.Time) []byte {
	b = append(b, `{"metric":"`...)
	b = append(b, metric...)
	b = append(b, `","value":`...)
	b = strconv.AppendFloat(b, v, 'f', -1, 64)
	b = append(b, `,"boot":`...)
	b = strconv.AppendInt(b, boot, 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, at.UnixMilli(), 10)
	return append(b, `,"debug":false}`...)
}

// watchStall logs progress every 5 s and, when nothing was persisted for
// 20 s while messages are outstanding, writes a goroutine dump and the
// database's locks and sessions (what a stall needs to be explained).
func (r *rig[TTx]) watchStall(stop <-chan struct{}, stalled chan<- string, persisted, published func() int64) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	last, lastAt := int64(0), time.Now()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		p, pub := persisted(), published()
		r.t.Logf("progress: published %d, persisted %d, backlog %d", pub, p, r.count("SELECT count(*) FROM alarm_telemetry WHERE NOT evaluated"))
		if p > last {
			last, lastAt = p, time.Now()
			continue
		}
		if p >= pub || time.Since(lastAt) < 20*time.Second {
			continue
		}
		dir := os.Getenv("ALARM_BENCH_DUMP")
		if dir == "" {
			dir = r.t.TempDir()
		}
		f, err := os.Create(filepath.Join(dir, "alarm-stall-goroutines.txt"))
		if err == nil {
			_ = pprof.Lookup("goroutine").WriteTo(f, 2)
			_ = f.Close()
		}
		var locks string
		rows, err := r.e.DB.Query(context.Background(), `SELECT a.pid::text || ' ' || a.state || ' ' || coalesce(a.wait_event_type, '') || ' ' ||
			coalesce(a.wait_event, '') || ' ' || left(a.query, 160) || ' blocked_by=' || pg_blocking_pids(a.pid)::text
			FROM pg_stat_activity a WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()`)
		if err == nil {
			for rows.Next() {
				var s string
				if rows.Scan(&s) == nil {
					locks += s + "\n"
				}
			}
			rows.Close()
		}
		_ = os.WriteFile(filepath.Join(dir, "alarm-stall-sessions.txt"), []byte(locks), 0o644)
		stalled <- fmt.Sprintf("stalled: %d of %d persisted, nothing for 20 s; dumps in %s", p, pub, dir)
		return
	}
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}
