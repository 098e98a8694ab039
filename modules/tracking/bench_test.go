package tracking

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/ingest"
)

// BenchmarkTrackingBacklog ingests a backlog of carrier events on
// PostgreSQL with everything a live push does: raw evidence under its
// idempotency key, normalization, the aggregate's conditional advance and
// the outbox row of every change. The backlog is KEEL_TRACKING_BACKLOG
// events (default 120,000: the seed's 1,200,000 scaled by 1/10; set it to
// 1200000 for the full figure), 8 events per waybill in source order, in
// pushes of 500 events from 8 concurrent senders. It reports events/s.
func BenchmarkTrackingBacklog(b *testing.B) {
	total := 120_000
	if s := os.Getenv("KEEL_TRACKING_BACKLOG"); s != "" {
		total, _ = strconv.Atoi(s)
	}
	const perWaybill, batch, senders = 8, 500, 8
	codes := []string{"COLLECT", "EXPORT", "ARRIVE", "CUSTOMS", "DELIVERING", "SIGNED", "EXCEPT", "SIGNED"}
	for i := 0; i < b.N; i++ {
		e := newEnv(moduletest.Postgres(b, lines))
		m, _ := e.module(b, domain.DemoCarriers()...)
		// Each sender owns its waybills, as pushes of one carrier feed do.
		waybills := total / perWaybill
		work := make(chan []domain.RawEvent, senders)
		go func() {
			defer close(work)
			var buf []domain.RawEvent
			for w := 0; w < waybills; w += batch / perWaybill {
				buf = nil
				for k := w; k < w+batch/perWaybill && k < waybills; k++ {
					wb := fmt.Sprintf("BK%08d", k)
					for s := 1; s <= perWaybill; s++ {
						buf = append(buf, domain.RawEvent{SourceID: fmt.Sprintf("%s-%d", wb, s), Waybill: wb, Seq: int64(s),
							Code: codes[s-1], OccurredRaw: t0.Add(time.Duration(s) * time.Hour).Format(time.RFC3339), Location: "SZX",
							Payload: []byte(fmt.Sprintf(`{"event_id":"%s-%d","waybill":"%s","seq":%d,"code":"%s"}`, wb, s, wb, s, codes[s-1]))})
					}
				}
				work <- buf
			}
		}()
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var ingested int
		for s := 0; s < senders; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for evs := range work {
					if _, err := m.svc.Ingest(context.Background(), "cnhub", ingest.ViaWebhook, evs); err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					ingested += len(evs)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		took := time.Since(start)
		b.StopTimer()
		if n := e.Count(b, "SELECT count(*) FROM tracking_raw_event"); n != int64(ingested) {
			b.Fatalf("raw rows %d, ingested %d", n, ingested)
		}
		if n := e.Count(b, "SELECT count(*) FROM tracking_waybill WHERE seq = 8"); n != int64(waybills) {
			b.Fatalf("waybills at their last event: %d of %d", n, waybills)
		}
		b.ReportMetric(float64(ingested)/took.Seconds(), "events/s")
		b.Logf("%d events (%d waybills) in %s: %.0f events/s", ingested, waybills, took.Round(time.Millisecond), float64(ingested)/took.Seconds())
	}
}
