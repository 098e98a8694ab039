package alarm

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelwork/keel/module/moduletest"
)

// BenchmarkAlarmMQTTIngest offers telemetry over MQTT into Mosquitto (a
// broker of its own: max_queued_messages 0, max_inflight_messages 200) at
// ALARM_BENCH_RATE messages/s (default 10,000) for ALARM_BENCH_SECONDS
// (default 15) from a gateway-fault storm (every reading over the warn
// threshold), with a severe reading every 100 ms; PostgreSQL, four
// consumers in the shared subscription. It reports the sustained ingest
// rate (persisted, acknowledged), the severe end-to-end p50/p99 (publish to
// the webhook receiver), the ordinary backlog left, the compression ratio
// and the process's peak heap. Run with -benchtime=1x.
func BenchmarkAlarmMQTTIngest(b *testing.B) {
	rate := envInt("ALARM_BENCH_RATE", 10000)
	secs := envInt("ALARM_BENCH_SECONDS", 15)
	devices := envInt("ALARM_BENCH_DEVICES", 2000)
	broker := startMosquittoInflight(b, 200)
	e := moduletest.Postgres(b, Lines)
	r := start(b, e, map[string]string{"alarm.mqtt_url": broker.url(), "alarm.consumers": "4", "alarm.pool_size": "12",
		"alarm.reserved_conns": "3", "alarm.group_wait": "2s", "alarm.group_interval": "2s",
		"test.real_clock": "1", "alarm.low_water": "1000000", "alarm.high_water": "2000000", "alarm.storm_water": "3000000"})
	ctx := context.Background()
	for i := 0; i < devices; i++ {
		_, id := FleetDevice(i)
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
	const pubs = 4
	var published atomic.Int64
	var sevSent sync.Map
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for p := 0; p < pubs; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pub, err := NewPublisher(broker.url(), fmt.Sprintf("bench-pub-%d", p))
			if err != nil {
				b.Error(err)
				return
			}
			defer pub.Close()
			per := rate / pubs / 100 // per 10 ms tick
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			seq := int64(0)
			for time.Since(start) < time.Duration(secs)*time.Second {
				<-tick.C
				seq++
				for k := 0; k < per; k++ {
					d := (int(seq)*per*pubs + p*per + k) % devices
					gw, id := FleetDevice(d)
					pub.Publish(Sample{Gateway: gw, Device: id, Metric: "temp", Value: 85 + float64(k%10), Boot: 1, Seq: seq, DeviceAt: time.Now()})
					published.Add(1)
				}
				if p == 0 && seq%10 == 0 && seq/10 < severeDevices {
					dev := fmt.Sprintf("sev%03d", seq/10)
					sevSent.Store(dev, time.Now())
					pub.Publish(Sample{Gateway: "gws", Device: dev, Metric: "temp", Value: 130, Boot: 1, Seq: 1, DeviceAt: time.Now()})
					published.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	offeredFor := time.Since(start)
	want := published.Load()
	moduletest.WaitFor(b, 10*time.Minute, "every published reading persisted", func() bool {
		c, err := r.m.CounterMap(ctx)
		return err == nil && c[StageIngest+"/persisted"]+c[StageIngest+"/duplicate"] >= want
	})
	ingestFor := time.Since(start)
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
	panel := r.m.StormPanel(ctx)
	ingest := float64(want) / ingestFor.Seconds()
	b.ReportMetric(float64(want)/offeredFor.Seconds(), "offered_msgs/s")
	b.ReportMetric(ingest, "ingest_msgs/s")
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "severe_p50_ms")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Milliseconds()), "severe_p99_ms")
	b.ReportMetric(float64(backlog), "ordinary_backlog")
	b.ReportMetric(panel.Compression, "compression")
	b.ReportMetric(float64(peakHeap.Load())/(1<<20), "peak_heap_MiB")
	b.Logf("last evaluation error: %v", r.m.lastEvalErr.Load())
	b.Logf("published %d in %v (offered), persisted all in %v; severe %d; backlog %d; counters %v", want, offeredFor, ingestFor, len(lat), backlog, panel.Counters)
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}
