package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelsql"
)

// eventsLines is the events backbone's migration line.
func eventsLines(dialect string) []keelmigrate.Line {
	if dialect != "postgres" && dialect != "sqlite" {
		return nil
	}
	return []keelmigrate.Line{keelevents.Line(dialect)}
}

// serveEvents is the server's events backbone and the bus it owns.
type serveEvents[TTx any] struct {
	ev  *keelevents.Events[TTx]
	bus keelevents.Bus
}

func (s *serveEvents[TTx]) close() {
	if s.bus != nil {
		_ = s.bus.Close()
	}
}

// newServeEvents builds the events backbone of a server on the bus
// serveEventsBus chooses.
func newServeEvents[TTx any](ctx context.Context, mdb keelsql.DB[TTx], o *ServeOpts, logger *slog.Logger, reg prometheus.Registerer) (*serveEvents[TTx], error) {
	bus, err := serveEventsBus(ctx, mdb, o, logger)
	if err != nil {
		return nil, fmt.Errorf("opening the events bus: %w", err)
	}
	ev, err := keelevents.New(mdb, bus, &keelevents.Config{Registerer: reg, Logger: logger, Retention: o.EventsRetention})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("setting up events: %w", err), bus.Close())
	}
	return &serveEvents[TTx]{ev: ev, bus: bus}, nil
}

// serveEventsBus is the seam where a broker plugs in: it returns the bus
// the relay publishes to and consumers subscribe on. Without a broker
// configured it is the in-database bus, which needs nothing installed;
// with nats-url (keel dev: its embedded server) it is JetStream.
func serveEventsBus[TTx any](ctx context.Context, mdb keelsql.DB[TTx], o *ServeOpts, logger *slog.Logger) (keelevents.Bus, error) {
	return eventsBus(ctx, o, mdb, keelevents.DefaultPartitions, logger)
}

// stopper is what shutdown needs of the events backbone.
type stopper interface {
	Stop(ctx context.Context) error
}
