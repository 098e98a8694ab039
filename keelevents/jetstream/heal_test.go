package jetstream_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/keelwork/keel/internal/syncbuf"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/bustest"
	"github.com/keelwork/keel/keelevents/jetstream/jstest"
)

// TestHealsALostPosition drives the machine's server (Debian's 2.9) into
// the fault heal.go describes, the way dying consumer instances do: an
// instance pulls the partition's one message, dies before acknowledging
// it, and the server's redelivery finds only its dead pull request. Three
// such deaths step the consumer's position back past zero; the server then
// delivers nothing more of the partition. A Keel subscriber started on it
// notices, logs it and recreates the consumer at its acknowledgement
// floor: the handler gets the stuck message and the one published after
// the fault. A server without the fault (2.10.14 and later) skips the test.
func TestHealsALostPosition(t *testing.T) {
	t.Parallel()
	url := jstest.ServerURL(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if v := nc.ConnectedServerVersion(); !strings.HasPrefix(v, "2.9.") && !strings.HasPrefix(v, "2.10.") {
		t.Skipf("the server (%s) does not lose consumer positions", v)
	}
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}

	var logs syncbuf.Buffer
	cfg := testConfig(url)
	cfg.Partitions, cfg.Namespace, cfg.HealEvery = 1, fmt.Sprintf("heal%d", time.Now().UnixNano()%1e9), 100*time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	bus := newBus(t, cfg)
	defer bus.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var mu sync.Mutex
	got := map[string]int{}
	sub := keelevents.Subscription{Consumer: "healer", Topics: []string{"heal.>"}, Ordered: true,
		AckWait: 500 * time.Millisecond, Backoff: []time.Duration{20 * time.Millisecond}}
	handler := func(_ context.Context, d *keelevents.Delivery) error {
		mu.Lock()
		got[d.ID]++
		mu.Unlock()
		return nil
	}
	// The first subscription creates the durable consumer, then stops.
	s, err := bus.Subscribe(ctx, sub, handler)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stream := strings.ToUpper(cfg.Namespace) + "_HEAL"
	var durable string
	for name := range mustStream(t, js, stream).ListConsumers(ctx).Info() {
		durable = name.Name
	}
	if durable == "" {
		t.Fatal("no consumer was created")
	}
	info := func() *natsjs.ConsumerInfo {
		c, err := js.Consumer(ctx, stream, durable)
		if err != nil {
			t.Fatal(err)
		}
		return c.CachedInfo()
	}
	if _, err := bus.Publish(ctx, []keelevents.Message{bustest.Msg("heal.x", "m-1", "k", 0, `{"n":1}`)}); err != nil {
		t.Fatal(err)
	}

	// Instances die holding m-1 until the position has stepped back past
	// zero (three deaths whose redelivery found only the dead request).
	// Nothing here may read the consumer between a death and the
	// redelivery: reading it prunes the dead request, and the fault needs
	// it. So each death is followed by a wait of three AckWaits for the
	// server's redelivery timer, and the position is read only then; a
	// death whose redelivery came late is simply one more round.
	for round := 0; info().Delivered.Stream != math.MaxUint64-1; round++ {
		if round == 12 {
			t.Fatalf("the position did not step back past zero in %d deaths: delivered stream sequence %d", round, info().Delivered.Stream)
		}
		dead, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		inbox := nats.NewInbox()
		msgs, err := dead.SubscribeSync(inbox)
		if err != nil {
			t.Fatal(err)
		}
		// Batch 2: the request still waits after its one delivery.
		if err := dead.PublishRequest("$JS.API.CONSUMER.MSG.NEXT."+stream+"."+durable, inbox,
			[]byte(`{"batch":2,"expires":30000000000}`)); err != nil {
			t.Fatal(err)
		}
		m, err := msgs.NextMsg(20 * time.Second)
		if err != nil || m.Header.Get("Status") != "" {
			t.Fatalf("round %d: no delivery of m-1 (%v)", round, err)
		}
		dead.Close()
		time.Sleep(3 * sub.AckWait)
	}
	if _, err := bus.Publish(ctx, []keelevents.Message{bustest.Msg("heal.x", "m-2", "k", 0, `{"n":2}`)}); err != nil {
		t.Fatal(err)
	}
	lost := info()
	if lost.Delivered.Stream <= 2 || lost.NumPending != 0 {
		t.Fatalf("the fault did not happen: delivered stream sequence %d, %d pending", lost.Delivered.Stream, lost.NumPending)
	}
	t.Logf("after three deaths: delivered stream sequence %d of 2, %d pending", lost.Delivered.Stream, lost.NumPending)

	// A Keel subscriber heals it: both messages are handled.
	s, err = bus.Subscribe(ctx, sub, handler)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		done := got["m-1"] > 0 && got["m-2"] > 0
		seen := fmt.Sprint(got)
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			c := info()
			t.Fatalf("timed out waiting for both messages; handled %s; consumer delivered %d/%d, %d pending\n%s",
				seen, c.Delivered.Consumer, c.Delivered.Stream, c.NumPending, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "lost this consumer's position") {
		t.Errorf("the heal was not logged:\n%s", logs.String())
	}
	// It starts again at m-1 if the heal came before m-1's redelivery was
	// acknowledged, else right after it (the server lost the floor too).
	if c := info(); c.Config.DeliverPolicy != natsjs.DeliverByStartSequencePolicy || c.Config.OptStartSeq < 1 || c.Config.OptStartSeq > 2 {
		t.Errorf("healed consumer starts with %v at %d, want by start sequence at 1 or 2", c.Config.DeliverPolicy, c.Config.OptStartSeq)
	}
	// A later subscription keeps the healed start instead of failing on it.
	s2, err := bus.Subscribe(ctx, sub, handler)
	if err != nil {
		t.Fatalf("subscribing again to a healed consumer: %v", err)
	}
	_ = s2.Stop(ctx)
}

func mustStream(t *testing.T, js natsjs.JetStream, name string) natsjs.Stream {
	t.Helper()
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
