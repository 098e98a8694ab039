package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/jetstream"
	"github.com/keelwork/keel/keelevents/jetstream/embedded"
	"github.com/keelwork/keel/keelsql"
)

// natsURLSetting is `keel serve --nats-url`: events then travel on that
// server's (or cluster's) JetStream instead of the database.
var natsURLSetting = Setting{"nats-url", "KEEL_NATS_URL", "",
	"NATS server or cluster (nats://host:4222,…) whose JetStream carries events instead of the database"}

// parseNATSURL checks a comma-separated list of NATS URLs.
func parseNATSURL(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil
	}
	for _, part := range strings.Split(s, ",") {
		u, err := url.Parse(strings.TrimSpace(part))
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("setting nats-url: want nats://host:port (comma-separated for a cluster), got %q", part)
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return "", fmt.Errorf("setting nats-url: scheme %q is not nats, tls, ws or wss in %q", u.Scheme, part)
		}
	}
	return s, nil
}

// openJetStream connects the JetStream bus; partitions must be the events
// partition count of the database.
func openJetStream(ctx context.Context, natsURL string, partitions int, logger *slog.Logger) (*jetstream.Bus, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := jetstream.New(cctx, jetstream.Config{URL: natsURL, Partitions: partitions, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("events on NATS JetStream: %w", err)
	}
	return b, nil
}

// startDevNATS starts `keel dev`'s embedded NATS server, JetStream stored
// under the data directory, on loopback, and says where it listens.
func startDevNATS(dataDir string, port int, out io.Writer) (*embedded.Server, error) {
	dir := filepath.Join(dataDir, "nats")
	s, err := embedded.Start(embedded.Config{Dir: dir, Port: port})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "keel dev: embedded NATS JetStream at %s (store %s)\n", s.URL(), dir)
	return s, nil
}

// eventsBus is the bus `keel serve` and `keel dev` carry events on:
// JetStream when o.NATSURL is set (keel dev sets its embedded server's),
// the database otherwise. partitions is the events partition count. The
// caller closes the bus after the events backbone stopped.
func eventsBus[TTx any](ctx context.Context, o *ServeOpts, db keelsql.DB[TTx], partitions int, logger *slog.Logger) (keelevents.Bus, error) {
	if o.NATSURL == "" {
		return keelevents.NewDatabaseBus(db, &keelevents.DatabaseBusConfig{Logger: logger})
	}
	b, err := openJetStream(ctx, o.NATSURL, partitions, logger)
	if err != nil {
		return nil, err
	}
	logger.Info("events on NATS JetStream", "url", b.Conn().ConnectedUrlRedacted(), "partitions", partitions)
	return b, nil
}
