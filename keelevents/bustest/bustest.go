// Package bustest is the conformance suite every keelevents.Bus passes: the
// in-database bus (keelevents) and JetStream (keelevents/jetstream) run the
// same subtests, so the outbox, relay and inbox can rely on one contract.
//
// The suite uses only the Bus interface. Each subtest works on topics and
// consumer names of its own (a random token), so one bus may serve several
// subtests; newBus is called once per subtest all the same, and the suite
// closes what it returns.
package bustest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/keelwork/keel/keelevents"
)

// waitFor bounds every wait of the suite: generous, since the machines that
// run it may be loaded.
const waitFor = 30 * time.Second

// backoff is short so that redelivery subtests finish quickly.
var backoff = []time.Duration{20 * time.Millisecond}

// Run runs the suite. newBus returns a bus ready to publish and subscribe.
func Run(t *testing.T, newBus func(t *testing.T) keelevents.Bus) {
	t.Helper()
	tests := []struct {
		name string
		f    func(t *testing.T, b keelevents.Bus)
	}{
		{"PublishAck", testPublishAck},
		{"DuplicateAbsorbed", testDuplicateAbsorbed},
		{"RedeliveryAfterError", testRedelivery},
		{"OrderedPerPartition", testOrdered},
		{"DurableResume", testDurableResume},
		{"TopicPrefix", testTopicPrefix},
		{"TwoConsumers", testTwoConsumers},
		{"SharedConsumer", testSharedConsumer},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBus(t)
			t.Cleanup(func() {
				if err := b.Close(); err != nil {
					t.Errorf("closing bus: %v", err)
				}
			})
			tc.f(t, b)
		})
	}
}

// token returns a random lowercase token for topics and consumer names.
func token(t *testing.T) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// Msg builds a message as the outbox would: digest of the payload, UTC
// emit time at microsecond precision (what every bus must carry exactly).
func Msg(topic, id, key string, partition int, payload string) keelevents.Message {
	sum := sha256.Sum256([]byte(payload))
	return keelevents.Message{
		Topic: topic, ID: id, Key: key, Type: topic + ".v1",
		Partition: partition,
		Payload:   []byte(payload),
		Headers:   map[string]string{"trace": "t-" + id},
		Digest:    hex.EncodeToString(sum[:]),
		EmittedAt: time.Now().UTC().Truncate(time.Microsecond),
	}
}

// recorder collects what handlers saw.
type recorder struct {
	mu       sync.Mutex
	seen     []keelevents.Delivery // every call, in call order
	acked    map[string]int        // topic/id -> acknowledgements
	changed  chan struct{}
	inflight map[int]int // partition -> handler calls in progress
	overlap  bool        // two calls of one partition overlapped
}

func newRecorder() *recorder {
	return &recorder{acked: map[string]int{}, changed: make(chan struct{}, 1), inflight: map[int]int{}}
}

func ref(m keelevents.Message) string { return m.Topic + "/" + m.ID }

// handler records each call; fail decides whether the call fails.
func (r *recorder) handler(fail func(d *keelevents.Delivery) bool, work time.Duration) keelevents.Handler {
	return func(ctx context.Context, d *keelevents.Delivery) error {
		r.mu.Lock()
		r.inflight[d.Partition]++
		if r.inflight[d.Partition] > 1 {
			r.overlap = true
		}
		r.mu.Unlock()
		if work > 0 {
			time.Sleep(work) // stands for the handler's own work
		}
		failed := fail != nil && fail(d)
		r.mu.Lock()
		r.inflight[d.Partition]--
		r.seen = append(r.seen, *d)
		if !failed {
			r.acked[ref(d.Message)]++
		}
		r.mu.Unlock()
		select {
		case r.changed <- struct{}{}:
		default:
		}
		if failed {
			return errors.New("bustest: handler failure on purpose")
		}
		return nil
	}
}

// wait blocks until cond (called under the lock) holds.
func (r *recorder) wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitFor)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline.C:
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("bustest: timed out waiting for %s (%d calls, %d acknowledged)", what, len(r.seen), len(r.acked))
		}
	}
}

func (r *recorder) ackedAll(msgs []keelevents.Message) func() bool {
	return func() bool {
		for _, m := range msgs {
			if r.acked[ref(m)] == 0 {
				return false
			}
		}
		return true
	}
}

func subscribe(t *testing.T, b keelevents.Bus, sub keelevents.Subscription, h keelevents.Handler) keelevents.Subscriber {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if sub.Backoff == nil {
		sub.Backoff = backoff
	}
	s, err := b.Subscribe(ctx, sub, h)
	if err != nil {
		cancel()
		t.Fatalf("subscribing %s: %v", sub.Consumer, err)
	}
	t.Cleanup(func() {
		stopCtx, c := context.WithTimeout(context.Background(), waitFor)
		defer c()
		if err := s.Stop(stopCtx); err != nil {
			t.Errorf("stopping %s: %v", sub.Consumer, err)
		}
		cancel()
	})
	return s
}

func publish(t *testing.T, b keelevents.Bus, msgs ...keelevents.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	n, err := b.Publish(ctx, msgs)
	if err != nil {
		t.Fatalf("publishing %d messages: %v (acknowledged %d)", len(msgs), err, n)
	}
	if n != len(msgs) {
		t.Fatalf("publish acknowledged %d of %d messages without an error", n, len(msgs))
	}
}

func testPublishAck(t *testing.T, b keelevents.Bus) {
	topic := "bt." + token(t) + ".ack"
	rec := newRecorder()
	subscribe(t, b, keelevents.Subscription{Consumer: "c-" + token(t), Topics: []string{topic}}, rec.handler(nil, 0))

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if n, err := b.Publish(ctx, nil); n != 0 || err != nil {
		t.Fatalf("publishing nothing: n=%d err=%v, want 0, nil", n, err)
	}
	var msgs []keelevents.Message
	for i := range 5 {
		msgs = append(msgs, Msg(topic, fmt.Sprintf("ack-%d", i), "k", i%3, fmt.Sprintf(`{"i":%d}`, i)))
	}
	publish(t, b, msgs...)
	rec.wait(t, "every message", rec.ackedAll(msgs))

	rec.mu.Lock()
	defer rec.mu.Unlock()
	byRef := map[string]keelevents.Delivery{}
	for _, d := range rec.seen {
		byRef[ref(d.Message)] = d
	}
	for _, m := range msgs {
		d := byRef[ref(m)]
		if d.Attempt != 1 {
			t.Errorf("%s: attempt %d, want 1", m.ID, d.Attempt)
		}
		if d.Key != m.Key || d.Type != m.Type || d.Partition != m.Partition || d.Digest != m.Digest ||
			string(d.Payload) != string(m.Payload) || d.Headers["trace"] != m.Headers["trace"] {
			t.Errorf("%s: delivered %+v, published %+v", m.ID, d.Message, m)
		}
		if !d.EmittedAt.Equal(m.EmittedAt) {
			t.Errorf("%s: emitted at %v, published with %v", m.ID, d.EmittedAt, m.EmittedAt)
		}
	}
}

func testDuplicateAbsorbed(t *testing.T, b keelevents.Bus) {
	topic := "bt." + token(t) + ".dup"
	rec := newRecorder()
	subscribe(t, b, keelevents.Subscription{Consumer: "c-" + token(t), Topics: []string{topic}, Ordered: true}, rec.handler(nil, 0))

	m1 := Msg(topic, "dup-1", "k", 0, `{"n":1}`)
	m2 := Msg(topic, "dup-2", "k", 0, `{"n":2}`)
	publish(t, b, m1)
	publish(t, b, m1, m2) // a relay republishing after an unknown outcome
	publish(t, b, m1)
	last := Msg(topic, "dup-3", "k", 0, `{"n":3}`)
	publish(t, b, last)
	// Ordered in one partition: a duplicate of m1 would arrive before last.
	rec.wait(t, "the last message", rec.ackedAll([]keelevents.Message{m1, m2, last}))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.seen) != 3 {
		t.Fatalf("handler called %d times for 3 distinct messages published 5 times: %v", len(rec.seen), ids(rec.seen))
	}
}

func testRedelivery(t *testing.T, b keelevents.Bus) {
	topic := "bt." + token(t) + ".retry"
	rec := newRecorder()
	fail := func(d *keelevents.Delivery) bool { return d.ID == "r-1" && d.Attempt < 3 }
	subscribe(t, b, keelevents.Subscription{Consumer: "c-" + token(t), Topics: []string{topic}}, rec.handler(fail, 0))

	m := Msg(topic, "r-1", "k", 1, `{}`)
	other := Msg(topic, "r-2", "k2", 2, `{}`)
	publish(t, b, m, other)
	rec.wait(t, "the failing message to succeed", rec.ackedAll([]keelevents.Message{m, other}))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var attempts []int
	for _, d := range rec.seen {
		if d.ID == m.ID {
			attempts = append(attempts, d.Attempt)
		}
	}
	if fmt.Sprint(attempts) != "[1 2 3]" {
		t.Fatalf("attempts of a message failing twice: %v, want [1 2 3]", attempts)
	}
	if rec.acked[ref(other)] != 1 {
		t.Fatalf("the other message acknowledged %d times", rec.acked[ref(other)])
	}
}

func testOrdered(t *testing.T, b keelevents.Bus) {
	topic := "bt." + token(t) + ".order"
	rec := newRecorder()
	// The fourth message of partition 0 fails twice: the later ones of
	// partition 0 must wait for it; partition 1 need not.
	fail := func(d *keelevents.Delivery) bool { return d.ID == "p0-3" && d.Attempt < 3 }
	subscribe(t, b, keelevents.Subscription{Consumer: "c-" + token(t), Topics: []string{topic}, Ordered: true}, rec.handler(fail, time.Millisecond))

	var msgs []keelevents.Message
	for i := range 10 {
		for p := range 2 {
			msgs = append(msgs, Msg(topic, fmt.Sprintf("p%d-%d", p, i), fmt.Sprintf("key-%d", p), p, fmt.Sprintf(`{"i":%d}`, i)))
		}
	}
	publish(t, b, msgs[:8]...)
	publish(t, b, msgs[8:]...)
	rec.wait(t, "every message", rec.ackedAll(msgs))

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.overlap {
		t.Error("two deliveries of one partition ran at the same time")
	}
	for p := range 2 {
		var got []string
		for _, d := range rec.seen {
			if d.Partition == p {
				got = append(got, fmt.Sprintf("%s#%d", d.ID, d.Attempt))
			}
		}
		var want []string
		for i := range 10 {
			want = append(want, fmt.Sprintf("p%d-%d#1", p, i))
			if p == 0 && i == 3 {
				want = append(want, "p0-3#2", "p0-3#3")
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("partition %d handled as\n %v\nwant\n %v", p, got, want)
		}
	}
}

func testDurableResume(t *testing.T, b keelevents.Bus) {
	topic := "bt." + token(t) + ".resume"
	consumer := "c-" + token(t)
	rec := newRecorder()
	sub := keelevents.Subscription{Consumer: consumer, Topics: []string{topic}}
	first := subscribe(t, b, sub, rec.handler(nil, 0))

	var msgs []keelevents.Message
	for i := range 20 {
		msgs = append(msgs, Msg(topic, fmt.Sprintf("d-%d", i), fmt.Sprintf("k%d", i%4), i%4, `{}`))
	}
	publish(t, b, msgs[:10]...)
	rec.wait(t, "three acknowledgements", func() bool { return len(rec.acked) >= 3 })
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := first.Stop(ctx); err != nil {
		t.Fatalf("stopping: %v", err)
	}
	rec.mu.Lock()
	callsAtStop := len(rec.seen)
	rec.mu.Unlock()
	publish(t, b, msgs[10:]...) // while nobody listens
	rec.mu.Lock()
	if len(rec.seen) != callsAtStop {
		t.Errorf("a stopped subscriber's handler was called")
	}
	rec.mu.Unlock()

	subscribe(t, b, sub, rec.handler(nil, 0))
	rec.wait(t, "every message after resuming", rec.ackedAll(msgs))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for r, n := range rec.acked {
		if n != 1 {
			t.Errorf("%s acknowledged %d times", r, n)
		}
	}
}

func testTopicPrefix(t *testing.T, b keelevents.Bus) {
	base := "bt." + token(t)
	rec := newRecorder()
	subscribe(t, b, keelevents.Subscription{
		Consumer: "c-" + token(t),
		Topics:   []string{base + ".pay.>", base + ".exact"},
		Ordered:  true,
	}, rec.handler(nil, 0))

	want := []keelevents.Message{
		Msg(base+".pay.succeeded", "t-1", "k", 0, `{}`),
		Msg(base+".pay.refund.done", "t-2", "k", 0, `{}`),
		Msg(base+".exact", "t-3", "k", 0, `{}`),
	}
	notWanted := []keelevents.Message{
		Msg(base+".payx.succeeded", "t-4", "k", 0, `{}`),
		Msg(base+".exact.more", "t-5", "k", 0, `{}`),
		Msg(base+".other", "t-6", "k", 0, `{}`),
	}
	last := Msg(base+".pay.last", "t-7", "k", 0, `{}`)
	publish(t, b, want[0], notWanted[0], want[1], notWanted[1], want[2], notWanted[2])
	publish(t, b, last)
	rec.wait(t, "the matching messages", rec.ackedAll(append(want, last)))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, m := range notWanted {
		if rec.acked[ref(m)] > 0 {
			t.Errorf("%s delivered to a consumer of %s.pay.> and %s.exact", m.Topic, base, base)
		}
	}
}

func testTwoConsumers(t *testing.T, b keelevents.Bus) {
	topic := "bt." + token(t) + ".fan"
	r1, r2 := newRecorder(), newRecorder()
	subscribe(t, b, keelevents.Subscription{Consumer: "a-" + token(t), Topics: []string{topic}}, r1.handler(nil, 0))
	subscribe(t, b, keelevents.Subscription{Consumer: "b-" + token(t), Topics: []string{topic}, Ordered: true}, r2.handler(nil, 0))
	var msgs []keelevents.Message
	for i := range 20 {
		msgs = append(msgs, Msg(topic, fmt.Sprintf("f-%d", i), fmt.Sprintf("k%d", i%3), i%3, `{}`))
	}
	publish(t, b, msgs...)
	r1.wait(t, "every message at the first consumer", r1.ackedAll(msgs))
	r2.wait(t, "every message at the second consumer", r2.ackedAll(msgs))
}

func testSharedConsumer(t *testing.T, b keelevents.Bus) {
	topic := "bt." + token(t) + ".shared"
	consumer := "c-" + token(t)
	rec := newRecorder()
	// Two instances of one durable consumer; each records who it is.
	// Each instance holds every delivery it gets until the other has had
	// one: whichever claims first saturates (its in-flight limit is below
	// the backlog), so the rest of the backlog must reach the other.
	// Left to timing, either can do all 100 on a loaded machine: the one
	// whose goroutine runs first claims, finishes and claims again before
	// the other is scheduled. Holding only one of them (an earlier form)
	// still failed that way when the unheld one got there first.
	var mu sync.Mutex
	by := map[string]int{}
	works := map[string]chan struct{}{"one": make(chan struct{}), "two": make(chan struct{})}
	once := map[string]*sync.Once{"one": new(sync.Once), "two": new(sync.Once)}
	other := map[string]string{"one": "two", "two": "one"}
	for _, name := range []string{"one", "two"} {
		h := rec.handler(nil, 5*time.Millisecond)
		subscribe(t, b, keelevents.Subscription{Consumer: consumer, Topics: []string{topic}}, func(ctx context.Context, d *keelevents.Delivery) error {
			mu.Lock()
			by[name]++
			mu.Unlock()
			once[name].Do(func() { close(works[name]) })
			select {
			case <-works[other[name]]:
			case <-time.After(10 * time.Second):
			case <-ctx.Done():
			}
			return h(ctx, d)
		})
	}
	var msgs []keelevents.Message
	for i := range 100 {
		msgs = append(msgs, Msg(topic, fmt.Sprintf("s-%d", i), fmt.Sprintf("k%d", i%8), i%8, `{}`))
	}
	publish(t, b, msgs[:50]...)
	publish(t, b, msgs[50:]...)
	rec.wait(t, "every message", rec.ackedAll(msgs))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for r, n := range rec.acked {
		if n != 1 {
			t.Errorf("%s acknowledged %d times by one durable consumer", r, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if by["one"] == 0 || by["two"] == 0 {
		t.Errorf("one instance did all the work: %v", by)
	}
}

func ids(ds []keelevents.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%s#%d", d.ID, d.Attempt))
	}
	sort.Strings(out)
	return out
}
