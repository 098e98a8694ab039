package jetstream_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/eventcrash"
	"github.com/keelwork/keel/keelevents/jetstream"
	"github.com/keelwork/keel/keelevents/jetstream/jstest"
)

// crashHarness runs the events crash scenarios with the JetStream bus on
// the machine's nats-server (KEEL_TEST_NATS_URL, inherited by the child
// processes), each test in its own namespace so streams and duplicate
// windows are not shared.
var crashHarness = eventcrash.Harness{Bus: "jetstream", NewBus: crashBus}

func crashBus(_ any, namespace string) (keelevents.Bus, error) {
	url := os.Getenv(envCrashURL)
	if url == "" {
		url = os.Getenv(jstest.EnvURL)
	}
	if url == "" {
		url = jstest.DefaultURL
	}
	return crashBusAt(url, namespace)
}

// envCrashURL names, for the children of one test, a server only that test
// knows (an embedded one).
const envCrashURL = "KEEL_EVCRASH_NATS_URL"

func crashBusAt(url, namespace string) (keelevents.Bus, error) {
	sum := sha256.Sum256([]byte(namespace))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return jetstream.New(ctx, jetstream.Config{URL: url, Partitions: 8, Namespace: "c" + hex.EncodeToString(sum[:6]),
		MaxAge: time.Hour, InactiveThreshold: 5 * time.Minute, PublishTimeout: 2 * time.Second})
}

func TestMain(m *testing.M) {
	eventcrash.Main(crashHarness)
	os.Exit(m.Run())
}

func TestCrashRelayKilled(t *testing.T) {
	jstest.ServerURL(t)
	eventcrash.RelayKilled(t, crashHarness)
}

func TestCrashConsumerKilled(t *testing.T) {
	jstest.ServerURL(t)
	eventcrash.ConsumerKilled(t, crashHarness)
}

func TestCrashThreeRelays(t *testing.T) {
	jstest.ServerURL(t)
	eventcrash.ThreeRelays(t, crashHarness)
}

// TestCrashWindowConsumerKilled runs windowed ordered consumers (16 per
// partition) on a server with pinned consumers (the embedded one: the
// machine's 2.9 has none) and SIGKILLs them after a commit: one effect per
// event, each key in order across the processes.
func TestCrashWindowConsumerKilled(t *testing.T) {
	t.Parallel()
	url := jstest.Embedded(t)
	h := crashHarness
	h.Env = []string{envCrashURL + "=" + url}
	h.NewBus = func(_ any, ns string) (keelevents.Bus, error) { return crashBusAt(url, ns) }
	eventcrash.WindowConsumerKilled(t, h, 16)
}
