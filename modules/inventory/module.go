// Package inventory is the warehouse inventory (WMS) module: stock per
// (warehouse, SKU), reservations per order line with their state machine,
// a unique stock ledger written with every balance change and its outbox
// event, consumers through the inbox (fulfilment, a search projection,
// statistics), a timeout release that asks the order service and the
// warehouse first, conflict tickets, adjustments with four-eyes approval
// above a threshold, admission control at the database's watermark,
// hot-SKU coalescing and reconciliation. See docs/inventory.md.
package inventory

import (
	"context"
	"errors"
	"fmt"
	"github.com/keelwork/keel/module/web"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/modules/inventory/store"
)

// Name is the module's name.
const Name = "inventory"

// Module is the inventory on a database whose transactions are TTx.
type Module[TTx any] struct {
	*module.Base[TTx]
	h     *module.Host[TTx]
	db    keelsql.DB[TTx]
	st    *store.Store
	set   *Settings
	ev    *keelevents.Events[TTx]
	recon *keelrecon.Recon[TTx]
	adm   *admission
	co    *coalescer[TTx]
	// gate holds a token per reservation transaction in flight (see
	// Settings.ReservationConns and reserveSlot).
	gate chan struct{}
	opt  options

	order, warehouse *http.Client

	pausedDeliveries atomic.Int64

	urlMu sync.RWMutex
	urls  [2]string // order service, warehouse
	demo  *demo
}

var _ module.Module[any] = (*Module[any])(nil)

type options struct {
	events    any
	clock     func() time.Time
	settings  func(*Settings)
	consumers bool
}

// Option adjusts New.
type Option func(*options)

// WithEvents gives the module the events backbone (the host's, when it
// offers one, is used otherwise).
func WithEvents[TTx any](ev *keelevents.Events[TTx]) Option {
	return func(o *options) { o.events = ev }
}

// WithClock sets the module's clock (tests).
func WithClock(now func() time.Time) Option { return func(o *options) { o.clock = now } }

// WithSettings adjusts the parsed settings (tests).
func WithSettings(f func(*Settings)) Option { return func(o *options) { o.settings = f } }

// WithoutConsumers builds the module without registering its consumers
// (a process that only takes reservations).
func WithoutConsumers() Option { return func(o *options) { o.consumers = false } }

// New builds the module; its consumers are registered with the events
// backbone here, before the host starts it.
func New[TTx any](h *module.Host[TTx], opts ...Option) (*Module[TTx], error) {
	base, err := module.NewBase(Name, h)
	if err != nil {
		return nil, err
	}
	o := options{consumers: true}
	for _, f := range opts {
		f(&o)
	}
	base.SetClock(o.clock)
	set, err := parseSettings(h.Settings)
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	if o.settings != nil {
		o.settings(set)
	}
	st, err := store.New(h.DB.Dialect())
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	ev, _ := o.events.(*keelevents.Events[TTx])
	if ev == nil {
		ev = hostEvents(h)
	}
	if ev == nil {
		return nil, errors.New("inventory: the host offers no events backbone (the ledger's events need an outbox)")
	}
	m := &Module[TTx]{Base: base, h: h, db: h.DB, st: st, set: set, ev: ev, opt: o,
		order: &http.Client{Timeout: 3 * time.Second}, warehouse: &http.Client{Timeout: 3 * time.Second}}
	m.recon = h.Recon
	if err := m.registerReconcilers(); err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	if err := m.registerApprovals(); err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	m.urls = [2]string{set.OrderURL, set.WarehouseURL}
	m.adm = newAdmission(set, time.Now)
	m.gate = make(chan struct{}, set.ReservationConns)
	if set.Coalesce {
		m.co = newCoalescer(m, set.CoalesceMax, set.lanes(h.DB.Dialect()))
	}
	if o.consumers {
		if err := m.registerConsumers(); err != nil {
			return nil, fmt.Errorf("inventory: %w", err)
		}
	}
	if m.Demo {
		if err := m.openDemo(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Name implements module.Web.
func (m *Module[TTx]) Name() string { return Name }

// Lines implements module.Module.
func (m *Module[TTx]) Lines() []keelmigrate.Line { return Lines(m.db.Dialect()) }

// Configure implements module.Module.
func (m *Module[TTx]) Configure(cfg *keel.Config) error { return nil }

// Start keeps the engine client and starts the background work.
func (m *Module[TTx]) Start(ctx context.Context, client *keel.Client[TTx]) error {
	if err := m.Bind(client); err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	if _, err := m.Life.Start(ctx); err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	m.Life.Go(m.sweepLoop(m.set.SweepEvery))
	if m.Demo {
		return m.startDemo(ctx)
	}
	return nil
}

// Stop ends the background work and the demo's simulators.
func (m *Module[TTx]) Stop(ctx context.Context) error {
	return errors.Join(m.Life.Stop(ctx), m.stopDemo(ctx))
}

// Settings returns the module's settings in force.
func (m *Module[TTx]) Config() Settings { return *m.set }

// Store is the module's statements (for reconcilers and tests).
func (m *Module[TTx]) Store() *store.Store { return m.st }

// Admission is the watermark's state now.
func (m *Module[TTx]) Admission() AdmissionState { return m.adm.state() }

// ForceBusy switches the watermark on or off by hand (an operator's
// protection ahead of a known peak).
func (m *Module[TTx]) ForceBusy(on bool) { m.adm.force(on) }

// SetBusy is ForceBusy as an operator's audited action.
func (m *Module[TTx]) SetBusy(ctx context.Context, on bool, reason string) error {
	reason, err := web.Reason(reason, true)
	if err != nil {
		return err
	}
	c, err := m.Client()
	if err != nil {
		return err
	}
	if err := c.AuditRecord(ctx, keel.Audit{Action: "inventory.admission", Target: "inventory", Reason: reason,
		Context: map[string]any{"busy": on}}); err != nil {
		return fmt.Errorf("auditing: %w", err)
	}
	m.adm.force(on)
	return nil
}

// Coalescing is the coalescer's counts (zero when it is off).
func (m *Module[TTx]) Coalescing() CoalesceStats {
	if m.co == nil {
		return CoalesceStats{}
	}
	return m.co.snapshot()
}

func (m *Module[TTx]) now() time.Time { return m.Now() }
