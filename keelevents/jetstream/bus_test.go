package jetstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/bustest"
	"github.com/keelwork/keel/keelevents/jetstream"
	"github.com/keelwork/keel/keelevents/jetstream/jstest"
)

// testConfig keeps what a test leaves on a shared server small and short-lived.
func testConfig(url string) jetstream.Config {
	return jetstream.Config{URL: url, Partitions: 8, MaxAge: time.Hour, InactiveThreshold: 5 * time.Minute}
}

func newBus(t *testing.T, cfg jetstream.Config) *jetstream.Bus { return newBusTB(t, cfg) }

func newBusTB(t testing.TB, cfg jetstream.Config) *jetstream.Bus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := jetstream.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestConformanceEmbedded runs the bus suite on an embedded server per subtest.
func TestConformanceEmbedded(t *testing.T) {
	t.Parallel()
	bustest.Run(t, func(t *testing.T) keelevents.Bus {
		return newBus(t, testConfig(jstest.Embedded(t)))
	})
}

// TestConformanceServer runs the bus suite on the machine's nats-server.
func TestConformanceServer(t *testing.T) {
	t.Parallel()
	url := jstest.ServerURL(t)
	bustest.Run(t, func(t *testing.T) keelevents.Bus {
		return newBus(t, testConfig(url))
	})
}
