package jetstream_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/bustest"
	"github.com/keelwork/keel/keelevents/jetstream/jstest"
)

// TestOrderedSharedByTwoInstances: two instances (two buses, two
// connections) subscribe the same ordered durable consumer; each partition
// is still handled one message at a time, in publish order, across both,
// and a failing message holds its partition back on both.
func TestOrderedSharedByTwoInstances(t *testing.T) {
	t.Parallel()
	url := jstest.Embedded(t)
	pub := newBus(t, testConfig(url))
	defer pub.Close()

	var mu sync.Mutex
	busy := map[int]bool{}
	var overlap []string
	got := map[int][]string{}
	by := map[string]int{}
	failed := map[string]bool{}
	handler := func(name string) keelevents.Handler {
		return func(_ context.Context, d *keelevents.Delivery) error {
			mu.Lock()
			if busy[d.Partition] {
				overlap = append(overlap, d.ID)
			}
			busy[d.Partition] = true
			mu.Unlock()
			time.Sleep(time.Millisecond) // the handler's own work, so that overlaps would show
			mu.Lock()
			defer mu.Unlock()
			busy[d.Partition] = false
			if d.ID == "p2-5" && !failed[d.ID] {
				failed[d.ID] = true
				return fmt.Errorf("failing once on purpose")
			}
			got[d.Partition] = append(got[d.Partition], d.ID)
			by[name]++
			return nil
		}
	}
	for _, name := range []string{"one", "two"} {
		b := newBus(t, testConfig(url))
		defer b.Close()
		s, err := b.Subscribe(context.Background(), keelevents.Subscription{Consumer: "shared-ordered", Topics: []string{"so.>"},
			Ordered: true, Backoff: []time.Duration{20 * time.Millisecond}}, handler(name))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop(context.Background())
	}
	const perPartition, partitions = 40, 4
	var msgs []keelevents.Message
	for i := range perPartition {
		for p := range partitions {
			msgs = append(msgs, bustest.Msg("so.events", fmt.Sprintf("p%d-%d", p, i), fmt.Sprintf("k%d", p), p, `{}`))
		}
	}
	ctx := context.Background()
	for i := 0; i < len(msgs); i += 16 {
		if _, err := pub.Publish(ctx, msgs[i:min(i+16, len(msgs))]); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 60*time.Second, "every message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handled(got) == len(msgs)
	})
	mu.Lock()
	defer mu.Unlock()
	if len(overlap) > 0 {
		t.Errorf("deliveries of one partition overlapped across instances: %v", overlap)
	}
	checkPartitions(t, got, partitions, perPartition)
	if by["one"] == 0 || by["two"] == 0 {
		t.Errorf("one instance did all the work: %v", by)
	}
}
