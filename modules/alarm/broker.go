package alarm

import (
	"fmt"
	"log/slog"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// EmbeddedBroker is the MQTT broker `keel dev` runs in process, so the run
// command needs nothing installed (production uses Mosquitto). It speaks
// MQTT 3.1.1/5 with shared subscriptions; sessions live in memory.
type EmbeddedBroker struct {
	s    *mochi.Server
	addr string
}

// StartEmbeddedBroker listens on addr (host:port; port 0 picks one).
func StartEmbeddedBroker(addr string) (*EmbeddedBroker, error) {
	s := mochi.New(&mochi.Options{InlineClient: false, Logger: slog.New(slog.DiscardHandler)})
	if err := s.AddHook(new(auth.AllowHook), nil); err != nil {
		return nil, err
	}
	tcp := listeners.NewTCP(listeners.Config{ID: "keel-dev", Address: addr})
	if err := s.AddListener(tcp); err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	go func() { _ = s.Serve() }()
	return &EmbeddedBroker{s: s, addr: tcp.Address()}, nil
}

// URL is the broker's tcp:// URL.
func (b *EmbeddedBroker) URL() string { return "tcp://" + b.addr }

// Close stops it.
func (b *EmbeddedBroker) Close() { _ = b.s.Close() }
