package reservation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/module"
)

// Name is the module's name.
const Name = "reservation"

// errNotStarted is returned by operations that need the engine client
// before Start gave it.
var errNotStarted = errors.New("reservation: module not started")

// Module is the no-show release module on a database whose transactions are
// TTx.
type Module[TTx any] struct {
	h         *module.Host[TTx]
	kit       *module.Base[TTx]
	st        *store[TTx]
	set       *settings
	log       *slog.Logger
	opt       options
	met       *metrics
	client    *module.Binding[TTx]
	templates pageTemplates
}

var _ module.Module[any] = (*Module[any])(nil)

// New builds the module from the host's database, logger, registerer and
// settings ("reservation.zone", "reservation.page_size", ...; see the
// Default constants).
func New[TTx any](h *module.Host[TTx], opts ...Option) (*Module[TTx], error) {
	base, err := module.NewBase(Name, h)
	if err != nil {
		return nil, err
	}
	if h.Events == nil {
		return nil, errors.New("reservation: host has no events backbone (Host.Events): availability events go through it")
	}
	q, err := base.Queries(queryFiles, "queries")
	if err != nil {
		return nil, fmt.Errorf("reservation: %w", err)
	}
	set, err := parseSettings(h.Settings)
	if err != nil {
		return nil, fmt.Errorf("reservation: %w", err)
	}
	m := &Module[TTx]{h: h, kit: base, client: base.Engine(), st: newStore(h.DB, q),
		set: set, log: base.Log}
	m.opt = defaultOptions()
	for _, o := range opts {
		o(&m.opt)
	}
	base.SetClock(m.opt.clock) // WithClock wins over the host's clock
	if m.opt.channel == nil {
		m.opt.channel = m.defaultChannel()
	}
	if m.opt.publisher == nil {
		m.opt.publisher = logPublisher{log: m.log}
	}
	if m.met, err = newMetrics(h.Registerer); err != nil {
		return nil, fmt.Errorf("reservation: metrics: %w", err)
	}
	if m.templates, err = parseTemplates(); err != nil {
		return nil, fmt.Errorf("reservation: templates: %w", err)
	}
	for _, c := range []keelevents.Consumer[TTx]{m.availabilityConsumer(), m.notifierConsumer()} {
		if err := h.Events.Consume(c); err != nil {
			return nil, fmt.Errorf("reservation: %w", err)
		}
	}
	return m, nil
}

// Name implements module.Web.
func (m *Module[TTx]) Name() string { return Name }

// Lines implements module.Module.
func (m *Module[TTx]) Lines() []keelmigrate.Line { return Lines(m.st.db.Dialect()) }

// Start keeps the engine client (release transactions insert notification
// jobs through it), refreshes the dead-letter gauge and, for `keel dev`,
// seeds demo data and starts the demo loop.
func (m *Module[TTx]) Start(ctx context.Context, client *keel.Client[TTx]) error {
	if err := m.client.Bind(client); err != nil {
		return fmt.Errorf("reservation: %w", err)
	}
	if err := m.refreshDeadLetters(ctx); err != nil {
		return fmt.Errorf("reservation: start: %w", err)
	}
	if err := m.handOverLeftovers(ctx); err != nil {
		return fmt.Errorf("reservation: start: %w", err)
	}
	if m.h.Demo {
		return m.startDemo(ctx)
	}
	return nil
}

// Stop ends the demo loop, waiting until ctx ends at most.
func (m *Module[TTx]) Stop(ctx context.Context) error { return m.kit.Life.Stop(ctx) }

func (m *Module[TTx]) engine() (*keel.Client[TTx], error) {
	c, err := m.client.Client()
	if err != nil {
		return nil, errNotStarted
	}
	return c, nil
}

// now is the module's clock in UTC, truncated to microseconds so that both
// databases store exactly the instant compared.
func (m *Module[TTx]) now() time.Time { return m.kit.Now() }

// instance names this process in run records.
func (m *Module[TTx]) instance() string {
	if c := m.client.Load(); c != nil {
		return c.ID()
	}
	return "unstarted"
}
