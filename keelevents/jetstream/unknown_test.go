package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/bustest"
	"github.com/keelwork/keel/keelevents/jetstream/jstest"
)

// TestStalledBrokerOutcomeUnknown: a broker that stops answering (SIGSTOP)
// makes a pipelined publish time out; the bus reports the acknowledged
// prefix and ErrOutcomeUnknown, never a definite failure. Once the broker
// answers again, republishing the same batch (the relay's rule) stores each
// event exactly once: the duplicate window absorbs what the stalled server
// had already stored.
func TestStalledBrokerOutcomeUnknown(t *testing.T) {
	t.Parallel()
	proc := jstest.StartProcess(t)
	cfg := testConfig(proc.URL())
	cfg.PublishTimeout = 500 * time.Millisecond
	bus := newBus(t, cfg)
	defer bus.Close()
	ctx := context.Background()
	var msgs []keelevents.Message
	for i := range 100 {
		msgs = append(msgs, bustest.Msg("stall.events", fmt.Sprintf("s-%d", i), fmt.Sprintf("k%d", i%8), i%8, `{}`))
	}
	if _, err := bus.Publish(ctx, msgs[:10]); err != nil { // the stream exists, the connection is warm
		t.Fatal(err)
	}

	proc.Pause()
	n, err := bus.Publish(ctx, msgs[10:])
	proc.Resume()
	if !errors.Is(err, keelevents.ErrOutcomeUnknown) {
		t.Fatalf("publish to a stalled broker: n=%d err=%v, want ErrOutcomeUnknown", n, err)
	}
	t.Logf("stalled: %d acknowledged, then %v", n, err)

	rest := msgs[10+n:]
	waitUntil(t, 30*time.Second, "the republish to be acknowledged", func() bool {
		m, err := bus.Publish(ctx, rest)
		rest = rest[m:]
		return err == nil && len(rest) == 0
	})
	js, err := natsjs.New(bus.Conn())
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KEEL_STALL")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(len(msgs)) {
		t.Fatalf("stream holds %d messages for %d events", info.State.Msgs, len(msgs))
	}
}
