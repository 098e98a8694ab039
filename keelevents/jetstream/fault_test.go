package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/bustest"
	"github.com/keelwork/keel/keelevents/jetstream/jstest"
)

// effects counts what a consumer applied, absorbing redeliveries the way the
// inbox does (one effect per event id), and checks per-partition order of
// first applications.
type effects struct {
	mu       sync.Mutex
	calls    int
	applied  map[string]int // id -> publish index
	lastIdx  map[int]int    // partition -> index of the last first application
	disorder []string
	changed  chan struct{}
}

func newEffects() *effects {
	return &effects{applied: map[string]int{}, lastIdx: map[int]int{}, changed: make(chan struct{}, 1)}
}

func (e *effects) handler(index map[string]int) keelevents.Handler {
	return func(_ context.Context, d *keelevents.Delivery) error {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.calls++
		if _, dup := e.applied[d.ID]; dup {
			return nil
		}
		i := index[d.ID]
		if last, ok := e.lastIdx[d.Partition]; ok && i < last {
			e.disorder = append(e.disorder, fmt.Sprintf("%s after index %d", d.ID, last))
		}
		e.lastIdx[d.Partition] = i
		e.applied[d.ID] = i
		select {
		case e.changed <- struct{}{}:
		default:
		}
		return nil
	}
}

func (e *effects) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.applied)
}

// TestServerKilledMidStream kills the broker (SIGKILL) while a publisher with
// the relay's retry rule (republish the unacknowledged suffix with the same
// ids) and two consumers, one ordered, are running, then restarts it on the
// same port and store: both resume by themselves, nothing is lost, and the
// redeliveries are absorbed at the consumers.
func TestServerKilledMidStream(t *testing.T) {
	t.Parallel()
	proc := jstest.StartProcess(t)
	cfg := testConfig(proc.URL())
	cfg.PublishTimeout = 2 * time.Second
	pub := newBus(t, cfg)
	defer pub.Close()
	con := newBus(t, cfg)
	defer con.Close()

	const total, partitions = 3000, 8
	topic := "fault.events"
	msgs := make([]keelevents.Message, total)
	index := map[string]int{}
	for i := range msgs {
		id := fmt.Sprintf("e-%05d", i)
		msgs[i] = bustest.Msg(topic, id, fmt.Sprintf("k%d", i%partitions), i%partitions, fmt.Sprintf(`{"i":%d}`, i))
		index[id] = i
	}
	unordered, ordered := newEffects(), newEffects()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, c := range []struct {
		name    string
		ordered bool
		e       *effects
	}{{"fault-unordered", false, unordered}, {"fault-ordered", true, ordered}} {
		s, err := con.Subscribe(ctx, keelevents.Subscription{Consumer: c.name, Topics: []string{"fault.>"}, Ordered: c.ordered,
			AckWait: 2 * time.Second, Backoff: []time.Duration{50 * time.Millisecond}}, c.e.handler(index))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop(context.Background())
	}

	// The publisher: batches of 50, resuming after the acknowledged prefix.
	var acked, unknown, failed atomic.Int64
	pubDone := make(chan error, 1)
	go func() {
		from := 0
		for from < total {
			if ctx.Err() != nil {
				pubDone <- ctx.Err()
				return
			}
			end := min(from+50, total)
			pctx, pc := context.WithTimeout(ctx, 5*time.Second)
			n, err := pub.Publish(pctx, msgs[from:end])
			pc()
			from += n
			acked.Store(int64(from))
			if err != nil {
				if errors.Is(err, keelevents.ErrOutcomeUnknown) {
					unknown.Add(1)
				} else {
					failed.Add(1)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		pubDone <- nil
	}()

	waitUntil(t, 60*time.Second, "a third published", func() bool { return acked.Load() >= total/3 })
	proc.Kill()
	killedAt := acked.Load()
	waitUntil(t, 30*time.Second, "the publisher to notice", func() bool { return unknown.Load()+failed.Load() > 0 })
	proc.Start()
	t.Logf("killed at %d acknowledged; restarted", killedAt)

	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}
	for _, e := range []*effects{unordered, ordered} {
		waitUntil(t, 90*time.Second, "every event applied", func() bool { return e.count() == total })
	}
	// The duplicate window absorbed every republish: one stored message per event.
	js, err := natsjs.New(pub.Conn())
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KEEL_FAULT")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != total {
		t.Errorf("stream holds %d messages for %d events", info.State.Msgs, total)
	}
	for name, e := range map[string]*effects{"unordered": unordered, "ordered": ordered} {
		e.mu.Lock()
		t.Logf("%s: %d events applied once from %d handler calls; publisher: %d unknown outcomes, %d failed sends",
			name, len(e.applied), e.calls, unknown.Load(), failed.Load())
		if name == "ordered" && len(e.disorder) > 0 {
			t.Errorf("ordered consumer applied out of partition order: %v", e.disorder[:min(5, len(e.disorder))])
		}
		e.mu.Unlock()
	}
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
