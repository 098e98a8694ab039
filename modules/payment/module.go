// Package payment is Keel's payment module: payment orders for the
// module's own business orders, verified channel callbacks applied in one
// transaction with their evidence and outbox event, a double-entry ledger
// and an orders consumer fed through the inbox, refunds whose unknown
// outcome is queried before any retry, an active query of payments the
// channel never called back about, and four-way reconciliation (channel
// bill, payment and refund records, ledger, orders) with four-eyes
// compensation. The channels' verifiers and clients are in
// modules/payment/channel, their simulator in modules/payment/paysim.
// See docs/payment.md.
package payment

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsql/sqlfile"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/modules/payment/channel"
)

// Name is the module's name.
const Name = "payment"

// Merchant is one configured channel account: the channel's verifier and
// client and the identity its callbacks must carry.
type Merchant struct {
	Kind       channel.Kind
	MerchantID string
	AppID      string
	Channel    *channel.Channel
}

// Module is the payment module on a database whose transactions are TTx.
type Module[TTx any] struct {
	*module.Base[TTx]
	db    keelsql.DB[TTx]
	q     sqlfile.Set
	set   *Settings
	ev    *keelevents.Events[TTx]
	recon *keelrecon.Recon[TTx]
	met   *metrics
	group *succeeder[TTx] // the callback group commit (nil: one transaction per callback)

	mu        sync.RWMutex
	merchants map[channel.Kind]*Merchant

	demo *demo
}

var _ module.Module[any] = (*Module[any])(nil)

type options struct {
	events    any
	merchants []Merchant
	settings  func(*Settings)
}

// Option adjusts New.
type Option func(*options)

// WithEvents gives the module an events backbone (the host's otherwise).
func WithEvents[TTx any](ev *keelevents.Events[TTx]) Option {
	return func(o *options) { o.events = ev }
}

// WithMerchant configures a channel account.
func WithMerchant(m Merchant) Option {
	return func(o *options) { o.merchants = append(o.merchants, m) }
}

// WithSettings adjusts the parsed settings (tests).
func WithSettings(f func(*Settings)) Option { return func(o *options) { o.settings = f } }

// New builds the module and registers its consumers, reconcilers and
// approval kind.
func New[TTx any](h *module.Host[TTx], opts ...Option) (*Module[TTx], error) {
	base, err := module.NewBase(Name, h)
	if err != nil {
		return nil, err
	}
	var o options
	for _, f := range opts {
		f(&o)
	}
	set, err := parseSettings(h.Settings)
	if err != nil {
		return nil, fmt.Errorf("payment: %w", err)
	}
	if o.settings != nil {
		o.settings(set)
	}
	q, err := base.Queries(queryFiles, "queries")
	if err != nil {
		return nil, fmt.Errorf("payment: %w", err)
	}
	ev, _ := o.events.(*keelevents.Events[TTx])
	if ev == nil {
		ev = h.Events
	}
	if ev == nil {
		return nil, errors.New("payment: the host offers no events backbone (a payment's success is an outbox event)")
	}
	m := &Module[TTx]{Base: base, db: h.DB, q: q, set: set, ev: ev, recon: h.Recon,
		merchants: map[channel.Kind]*Merchant{}, met: newMetrics()}
	for _, mc := range o.merchants {
		m.AddMerchant(mc)
	}
	if set.CallbackBatch > 1 {
		m.group = newSucceeder(m, set.CallbackBatch, set.CallbackLanes)
	}
	if err := m.Register(m.met.collectors()...); err != nil {
		return nil, fmt.Errorf("payment: %w", err)
	}
	if err := m.registerConsumers(); err != nil {
		return nil, fmt.Errorf("payment: %w", err)
	}
	if err := m.registerRecon(); err != nil {
		return nil, fmt.Errorf("payment: %w", err)
	}
	return m, nil
}

// AddMerchant configures (or replaces) the account of a channel.
func (m *Module[TTx]) AddMerchant(mc Merchant) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := mc
	m.merchants[mc.Kind] = &c
}

func (m *Module[TTx]) merchant(k channel.Kind) (*Merchant, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	mc, ok := m.merchants[k]
	return mc, ok
}

func (m *Module[TTx]) kinds() []channel.Kind {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]channel.Kind, 0, len(m.merchants))
	for k := range m.merchants {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Name implements module.Web.
func (m *Module[TTx]) Name() string { return Name }

// Lines implements module.Module.
func (m *Module[TTx]) Lines() []keelmigrate.Line { return Lines(m.db.Dialect()) }

// Config is the settings in force.
func (m *Module[TTx]) Config() Settings { return *m.set }

// Configure registers the refund workers.
func (m *Module[TTx]) Configure(cfg *keel.Config) error {
	if cfg.Workers == nil {
		cfg.Workers = keel.NewWorkers()
	}
	if err := keel.AddWorkerSafely[RefundCallArgs](cfg.Workers, keel.WorkerFunc[RefundCallArgs](m.workRefundCall)); err != nil {
		return fmt.Errorf("payment: %w", err)
	}
	if err := keel.AddWorkerSafely[RefundQueryArgs](cfg.Workers, keel.WorkerFunc[RefundQueryArgs](m.workRefundQuery)); err != nil {
		return fmt.Errorf("payment: %w", err)
	}
	return nil
}

// Start keeps the engine client and starts the sweep (active queries,
// timeouts, health figures) and, under keel dev, the simulator and demo.
func (m *Module[TTx]) Start(ctx context.Context, client *keel.Client[TTx]) error {
	if err := m.Bind(client); err != nil {
		return fmt.Errorf("payment: %w", err)
	}
	if _, err := m.Life.Start(ctx); err != nil {
		return fmt.Errorf("payment: %w", err)
	}
	m.Life.Go(m.sweepLoop)
	if m.Demo {
		return m.startDemo(ctx)
	}
	return nil
}

// Stop ends the background work and the demo's simulator.
func (m *Module[TTx]) Stop(ctx context.Context) error {
	return errors.Join(m.Life.Stop(ctx), m.stopDemo())
}

func (m *Module[TTx]) sweepLoop(ctx context.Context) {
	t := time.NewTicker(m.set.SweepEvery)
	defer t.Stop()
	for {
		if _, err := m.Sweep(ctx); err != nil && ctx.Err() == nil {
			m.Log.Warn("payment sweep", "err", err)
		}
		m.refreshGauges(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
