package jetstream_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/bustest"
	"github.com/keelwork/keel/keelevents/jetstream"
	"github.com/keelwork/keel/keelevents/jetstream/jstest"
)

// windowRecorder is the handler side of the window tests: it applies each
// partition's deliveries in the order given, fails chosen ids a number of
// times, and keeps the contract that a partition's later deliveries fail
// after one of its deliveries failed in the same call.
type windowRecorder struct {
	mu       sync.Mutex
	busy     map[int]string // partition -> instance handling it now
	overlap  []string
	got      map[int][]string
	by       map[string]map[int]int // instance -> partition -> applied
	failLeft map[string]int
	maxSame  int // most deliveries of one partition in one call
	calls    int
}

func newWindowRecorder(fail map[string]int) *windowRecorder {
	return &windowRecorder{busy: map[int]string{}, got: map[int][]string{}, by: map[string]map[int]int{}, failLeft: fail}
}

func (r *windowRecorder) handler(name string) func(context.Context, []*keelevents.Delivery) []error {
	return func(_ context.Context, ds []*keelevents.Delivery) []error {
		r.mu.Lock()
		r.calls++
		per := map[int]int{}
		for _, d := range ds {
			if other, ok := r.busy[d.Partition]; ok && other != name {
				r.overlap = append(r.overlap, fmt.Sprintf("%s by %s and %s", d.ID, name, other))
			}
			r.busy[d.Partition] = name
			per[d.Partition]++
			r.maxSame = max(r.maxSame, per[d.Partition])
		}
		r.mu.Unlock()
		time.Sleep(time.Millisecond) // the call's own work, so that overlaps would show
		r.mu.Lock()
		defer r.mu.Unlock()
		errs := make([]error, len(ds))
		failed := map[int]bool{}
		for i, d := range ds {
			delete(r.busy, d.Partition)
			if failed[d.Partition] {
				errs[i] = fmt.Errorf("held back behind a failed delivery")
				continue
			}
			if r.failLeft[d.ID] > 0 {
				r.failLeft[d.ID]--
				failed[d.Partition] = true
				errs[i] = fmt.Errorf("failing on purpose")
				continue
			}
			r.got[d.Partition] = append(r.got[d.Partition], d.ID)
			if r.by[name] == nil {
				r.by[name] = map[int]int{}
			}
			r.by[name][d.Partition]++
		}
		return errs
	}
}

func (r *windowRecorder) applied() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return handled(r.got)
}

// handled counts the ids of got.
func handled(got map[int][]string) int {
	n := 0
	for _, ids := range got {
		n += len(ids)
	}
	return n
}

// checkPartitions reports a partition whose ids are not p<p>-0, p<p>-1, ...
// in that order, each once.
func checkPartitions(t *testing.T, got map[int][]string, partitions, perPartition int) {
	t.Helper()
	for p := range partitions {
		var want []string
		for i := range perPartition {
			want = append(want, fmt.Sprintf("p%d-%d", p, i))
		}
		if fmt.Sprint(got[p]) != fmt.Sprint(want) {
			t.Errorf("partition %d handled as %v", p, got[p])
		}
	}
}

// check reports any partition not applied exactly once each, in order.
func (r *windowRecorder) check(t *testing.T, partitions, perPartition int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.overlap) > 0 {
		t.Errorf("deliveries of one partition were handled by two instances at once: %v", r.overlap)
	}
	checkPartitions(t, r.got, partitions, perPartition)
}

func windowMsgs(topic string, partitions, perPartition int) []keelevents.Message {
	var msgs []keelevents.Message
	for i := range perPartition {
		for p := range partitions {
			msgs = append(msgs, bustest.Msg(topic, fmt.Sprintf("p%d-%d", p, i), fmt.Sprintf("k%d", p), p, `{}`))
		}
	}
	return msgs
}

func publishAll(t *testing.T, b *jetstream.Bus, msgs []keelevents.Message) {
	t.Helper()
	for i := 0; i < len(msgs); i += 100 {
		if _, err := b.Publish(context.Background(), msgs[i:min(i+100, len(msgs))]); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWindowOrderedTwoInstances: two instances share a windowed ordered
// consumer on a server with pinned consumers. Several deliveries of a
// partition reach the handler in one call, in order; a failing one holds
// its partition back and is retried in place; no partition is handled by
// both instances at once; and when the instance that owns partitions
// stops, the other takes them over at once (the stop unpins), well before
// the pin's lease would have run out.
func TestWindowOrderedTwoInstances(t *testing.T) {
	t.Parallel()
	url := jstest.Embedded(t)
	pub := newBus(t, testConfig(url))
	defer pub.Close()

	rec := newWindowRecorder(map[string]int{"p2-5": 2, "p5-30": 1})
	sub := func(name string) (*jetstream.Bus, keelevents.Subscriber) {
		b := newBus(t, testConfig(url))
		s, err := b.Subscribe(context.Background(), keelevents.Subscription{Consumer: "windowed", Topics: []string{"wo.>"},
			Ordered: true, Window: 16, HandleWindow: rec.handler(name), AckWait: 2 * time.Second,
			Backoff: []time.Duration{20 * time.Millisecond}}, func(context.Context, *keelevents.Delivery) error {
			t.Error("the one-at-a-time handler was called on a server with pinned consumers")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return b, s
	}
	b1, s1 := sub("one")
	defer b1.Close()
	b2, s2 := sub("two")
	defer b2.Close()
	defer s2.Stop(context.Background())

	const partitions, perPartition = 8, 60
	msgs := windowMsgs("wo.events", partitions, perPartition)
	half := len(msgs) / 2
	publishAll(t, pub, msgs[:half])
	waitUntil(t, 30*time.Second, "the first half", func() bool { return rec.applied() == half })

	rec.mu.Lock()
	owned := len(rec.by["one"])
	rec.mu.Unlock()
	if owned == 0 {
		// Which instance the server pins is its choice; the take-over below
		// is then shown the other way round.
		s1, s2 = s2, s1
	}
	stopped := time.Now()
	if err := s1.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	publishAll(t, pub, msgs[half:])
	// The pins' lease is 2×AckWait + 30 s = 34 s: finishing well within it
	// shows the stop handed its partitions over.
	waitUntil(t, 20*time.Second, "the second half, taken over by the other instance", func() bool { return rec.applied() == len(msgs) })
	t.Logf("second half taken over and applied in %s", time.Since(stopped).Round(time.Millisecond))

	rec.check(t, partitions, perPartition)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.maxSame < 2 {
		t.Errorf("no call had two deliveries of one partition (calls %d): the window was not used", rec.calls)
	}
	if rec.failLeft["p2-5"] != 0 || rec.failLeft["p5-30"] != 0 {
		t.Errorf("the failing deliveries were not retried: %v", rec.failLeft)
	}
}

// TestWindowOnServerWithoutPins: the machine's server (2.9 here) has no
// pinned consumers, so a windowed subscription falls back to one delivery
// in flight per partition through the plain handler, still in order.
func TestWindowOnServerWithoutPins(t *testing.T) {
	t.Parallel()
	cfg := testConfig(jstest.ServerURL(t))
	// A namespace of its own on the shared server.
	cfg.Namespace = fmt.Sprintf("wf%x", time.Now().UnixNano())
	b := newBus(t, cfg)
	defer b.Close()
	pins := jetstream.ServerPins(b)
	var mu sync.Mutex
	got := map[int][]string{}
	windowCalls := 0
	s, err := b.Subscribe(context.Background(), keelevents.Subscription{Consumer: "window-fallback", Topics: []string{"wf.>"},
		Ordered: true, Window: 16, HandleWindow: func(_ context.Context, ds []*keelevents.Delivery) []error {
			mu.Lock()
			defer mu.Unlock()
			windowCalls++
			for _, d := range ds {
				got[d.Partition] = append(got[d.Partition], d.ID)
			}
			return make([]error, len(ds))
		}}, func(_ context.Context, d *keelevents.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		got[d.Partition] = append(got[d.Partition], d.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	const partitions, perPartition = 4, 20
	publishAll(t, b, windowMsgs("wf.events", partitions, perPartition))
	waitUntil(t, 30*time.Second, "every message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handled(got) == partitions*perPartition
	})
	mu.Lock()
	defer mu.Unlock()
	checkPartitions(t, got, partitions, perPartition)
	if !pins && windowCalls > 0 {
		t.Errorf("the window handler ran %d times on a server without pinned consumers", windowCalls)
	}
	if pins && windowCalls == 0 {
		t.Errorf("the server has pinned consumers but the window was not used")
	}
}
