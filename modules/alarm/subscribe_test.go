package alarm

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// TestConsumerReturnsOnceSubscribed: StartConsumer's return means the
// broker holds the subscription. The consumer connects through a link
// that passes its CONNECT at once and holds everything after it back
// for a second (a slow or busy consumer host); a device publishing the
// moment StartConsumer returns must still reach it. Before the consumer
// waited for its SUBACK, the broker got the message while the shared
// subscription had no member and dropped it.
func TestConsumerReturnsOnceSubscribed(t *testing.T) {
	t.Parallel()
	broker := startMosquitto(t)
	link := holdAfterConnect(t, fmt.Sprintf("127.0.0.1:%d", broker.port), time.Second)
	got := make(chan string, 4)
	c, err := StartConsumer(context.Background(), ConsumerConfig{URL: "tcp://" + link, ClientID: "subwait", Group: "subwait",
		Submit: func(_ context.Context, topic string, _ []byte, ack func(error)) {
			got <- topic
			ack(nil)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	pub, err := NewPublisher(broker.url(), "subwait-pub")
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	tok := pub.Publish(Sample{Gateway: "gw1", Device: "d1", Metric: "temp", Value: 20, Boot: 1, Seq: 1, DeviceAt: time.Now()})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publish: %v", tok.Error())
	}
	select {
	case topic := <-got:
		if topic != Topic("gw1", "d1") {
			t.Fatalf("got %q", topic)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a message published once StartConsumer returned never reached the consumer")
	}
}

// holdAfterConnect listens on a port of its own and links each
// connection to target: the server's bytes pass at once, the client's
// first MQTT packet (CONNECT) too, and the rest of the client's bytes
// only after hold.
func holdAfterConnect(t *testing.T, target string, hold time.Duration) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			go func() { _, _ = io.Copy(in, out) }()
			go func() {
				r := bufio.NewReader(in)
				first, err := readMQTTPacket(r)
				if err != nil {
					return
				}
				if _, err := out.Write(first); err != nil {
					return
				}
				time.Sleep(hold) // the slow link this test is about
				_, _ = io.Copy(out, r)
			}()
		}
	}()
	return l.Addr().String()
}

// readMQTTPacket reads one whole packet: the fixed header's type byte,
// the remaining length (a variable-length integer of up to four bytes)
// and that many bytes.
func readMQTTPacket(r *bufio.Reader) ([]byte, error) {
	b0, err := r.ReadByte()
	if err != nil {
		return nil, err
	}
	pkt := []byte{b0}
	n, mult := 0, 1
	for i := 0; ; i++ {
		b, err := r.ReadByte()
		if err != nil {
			return nil, err
		}
		pkt = append(pkt, b)
		n += int(b&0x7f) * mult
		if b&0x80 == 0 {
			break
		}
		if i == 3 {
			return nil, fmt.Errorf("remaining length longer than four bytes")
		}
		mult *= 128
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return append(pkt, body...), nil
}

// TestConsumerRefusedSubscription: a broker that refuses the
// subscription (its access list does not grant the telemetry topics)
// fails the start with a sentence that says so, instead of a consumer
// that looks started and never receives anything. Mosquitto 2.0 grants
// every subscription and applies its access list at delivery, so the
// refusing broker here is mochi (the embedded broker's library) with a
// ledger that lets anyone connect and read only other topics.
func TestConsumerRefusedSubscription(t *testing.T) {
	t.Parallel()
	s := mochi.New(&mochi.Options{Logger: slog.New(slog.DiscardHandler)})
	ledger := &auth.Ledger{
		Auth: auth.AuthRules{{Allow: true}},
		ACL:  auth.ACLRules{{Filters: auth.Filters{"#": auth.Deny, "other/#": auth.ReadOnly}}},
	}
	if err := s.AddHook(new(auth.Hook), &auth.Options{Ledger: ledger}); err != nil {
		t.Fatal(err)
	}
	tcp := listeners.NewTCP(listeners.Config{ID: "refusing", Address: "127.0.0.1:0"})
	if err := s.AddListener(tcp); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve() }()
	t.Cleanup(func() { _ = s.Close() })
	c, err := StartConsumer(context.Background(), ConsumerConfig{URL: "tcp://" + tcp.Address(), ClientID: "refused", Group: "refused",
		Submit: func(_ context.Context, _ string, _ []byte, ack func(error)) { ack(nil) }})
	if err == nil {
		c.Stop()
		t.Fatal("StartConsumer returned a consumer whose subscription the broker refused")
	}
	if !strings.Contains(err.Error(), "refused the subscription") {
		t.Fatalf("want a refused subscription, got %v", err)
	}
}
