package jetstream_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/bustest"
	"github.com/keelwork/keel/keelevents/jetstream/jstest"
)

// BenchmarkPublish measures pipelined acknowledged publishes in relay-sized
// batches of 500 on an embedded server (b.N messages).
func BenchmarkPublish(b *testing.B) {
	bus := benchBus(b)
	msgs := benchMsgs("bp.events", b.N)
	b.ResetTimer()
	for i := 0; i < len(msgs); i += 500 {
		if _, err := bus.Publish(context.Background(), msgs[i:min(i+500, len(msgs))]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkConsume measures delivery to a no-op handler of b.N published
// messages, unordered and ordered.
func BenchmarkConsume(b *testing.B) {
	for _, ordered := range []bool{false, true} {
		b.Run(fmt.Sprintf("ordered=%v", ordered), func(b *testing.B) {
			bus := benchBus(b)
			topic := fmt.Sprintf("bc%v.events", ordered)
			msgs := benchMsgs(topic, b.N)
			var n atomic.Int64
			done := make(chan struct{})
			s, err := bus.Subscribe(context.Background(), keelevents.Subscription{Consumer: "bench", Topics: []string{topic}, Ordered: ordered},
				func(context.Context, *keelevents.Delivery) error {
					if n.Add(1) == int64(len(msgs)) {
						close(done)
					}
					return nil
				})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Stop(context.Background())
			for i := 0; i < len(msgs); i += 500 {
				if _, err := bus.Publish(context.Background(), msgs[i:min(i+500, len(msgs))]); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			<-done
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

func benchBus(b *testing.B) keelevents.Bus {
	cfg := testConfig(jstest.Embedded(b))
	cfg.Partitions = 16
	bus := newBusTB(b, cfg)
	b.Cleanup(func() { _ = bus.Close() })
	return bus
}

func benchMsgs(topic string, n int) []keelevents.Message {
	msgs := make([]keelevents.Message, n)
	for i := range msgs {
		msgs[i] = bustest.Msg(topic, fmt.Sprintf("m-%d", i), fmt.Sprintf("k%d", i%1000), i%16, `{"order":"o-1","amount":100,"currency":"CNY"}`)
	}
	return msgs
}

// BenchmarkLatency measures publish → handler latency of single-message
// publishes at about 1,000/s (b.N messages), unordered and ordered.
func BenchmarkLatency(b *testing.B) {
	for _, ordered := range []bool{false, true} {
		b.Run(fmt.Sprintf("ordered=%v", ordered), func(b *testing.B) {
			bus := benchBus(b)
			topic := fmt.Sprintf("bl%v.events", ordered)
			msgs := benchMsgs(topic, b.N)
			sent := make([]time.Time, b.N)
			lat := make([]time.Duration, b.N)
			var n atomic.Int64
			done := make(chan struct{})
			index := map[string]int{}
			for i, m := range msgs {
				index[m.ID] = i
			}
			s, err := bus.Subscribe(context.Background(), keelevents.Subscription{Consumer: "lat", Topics: []string{topic}, Ordered: ordered},
				func(_ context.Context, d *keelevents.Delivery) error {
					i := index[d.ID]
					lat[i] = time.Since(sent[i])
					if n.Add(1) == int64(len(msgs)) {
						close(done)
					}
					return nil
				})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Stop(context.Background())
			b.ResetTimer()
			t0 := time.Now()
			for i := range msgs {
				if d := time.Until(t0.Add(time.Duration(i) * time.Millisecond)); d > 0 {
					time.Sleep(d)
				}
				sent[i] = time.Now()
				if _, err := bus.Publish(context.Background(), msgs[i:i+1]); err != nil {
					b.Fatal(err)
				}
			}
			<-done
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
