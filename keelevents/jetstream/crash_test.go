package jetstream_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/eventcrash"
	"github.com/keelwork/keel/keelevents/jetstream"
	"github.com/keelwork/keel/keelevents/jetstream/jstest"
)

// crashHarness runs the events crash scenarios with the JetStream bus on
// the machine's nats-server (KEEL_TEST_NATS_URL, inherited by the child
// processes), each test in its own namespace so streams and duplicate
// windows are not shared.
var crashHarness = eventcrash.Harness{Bus: "jetstream", NewBus: crashBus, Diagnose: crashDiagnose}

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

// crashNamespace is the bus namespace of a test's namespace.
func crashNamespace(namespace string) string {
	sum := sha256.Sum256([]byte(namespace))
	return "c" + hex.EncodeToString(sum[:6])
}

// crashDiagnose lists the state of the namespace's consumers on the
// machine's server, for a scenario that timed out.
func crashDiagnose(namespace string) string {
	url := os.Getenv(jstest.EnvURL)
	if url == "" {
		url = jstest.DefaultURL
	}
	nc, err := nats.Connect(url)
	if err != nil {
		return "diagnose: " + err.Error()
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		return "diagnose: " + err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prefix := strings.ToUpper(crashNamespace(namespace)) + "_"
	var b strings.Builder
	for name := range js.StreamNames(ctx).Name() {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		s, err := js.Stream(ctx, name)
		if err != nil {
			fmt.Fprintf(&b, "stream %s: %v\n", name, err)
			continue
		}
		fmt.Fprintf(&b, "stream %s: %d messages, last sequence %d\n", name, s.CachedInfo().State.Msgs, s.CachedInfo().State.LastSeq)
		for ci := range s.ListConsumers(ctx).Info() {
			fmt.Fprintf(&b, "  %s: delivered %d/%d ack floor %d/%d pending %d ack pending %d redelivered %d waiting %d\n",
				ci.Name, ci.Delivered.Consumer, ci.Delivered.Stream, ci.AckFloor.Consumer, ci.AckFloor.Stream,
				ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting)
		}
	}
	return b.String()
}

func crashBusAt(url, namespace string) (keelevents.Bus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return jetstream.New(ctx, jetstream.Config{URL: url, Partitions: 8, Namespace: crashNamespace(namespace),
		MaxAge: time.Hour, InactiveThreshold: 5 * time.Minute, PublishTimeout: 2 * time.Second,
		// The machine's 2.9 loses a consumer's position now and then in
		// these scenarios (heal.go); heal within the scenarios' waits.
		HealEvery: 2 * time.Second})
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
