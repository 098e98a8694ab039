// Package tracking is cross-border parcel tracking as a Keel module: carrier
// events arrive by signed webhook push and by pull, are kept raw as
// evidence, normalized under versioned mappings, and advance a version-
// monotonic aggregate per waybill; gaps are backfilled on each carrier's
// own quota share and breaker (engine flow keys), changes leave through the
// outbox, and reconciliation proves each waybill converged. See
// docs/tracking.md.
package tracking

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/modules/tracking/carrierapi"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/ingest"
	"github.com/keelwork/keel/modules/tracking/jobs"
	"github.com/keelwork/keel/modules/tracking/store"
	"github.com/keelwork/keel/modules/tracking/web"
)

// Module is the tracking module on a database whose transactions are TTx.
type Module[TTx any] struct {
	*module.Base[TTx]
	set      *Settings
	carriers []*domain.Carrier
	store    *store.Store[TTx]
	svc      *ingest.Service[TTx]
	workers  *jobs.Workers[TTx]
	receiver *web.Receiver[TTx]

	hook     *http.Server
	hookAddr string
	demo     *demo
}

var _ module.Module[any] = (*Module[any])(nil)

// Option adjusts a module (tests).
type Option func(*options)

type options struct {
	carriers []domain.Carrier
	clock    func() time.Time
}

// WithCarriers replaces the configured carriers.
func WithCarriers(cs ...domain.Carrier) Option { return func(o *options) { o.carriers = cs } }

// WithClock sets the module's clock.
func WithClock(now func() time.Time) Option { return func(o *options) { o.clock = now } }

// New builds the module from its host: settings "tracking.carriers_file",
// "tracking.webhook_addr", "tracking.workers", "tracking.backfill_recheck",
// "tracking.demo_parcels", "tracking.demo_interval" (see Settings).
func New[TTx any](h *module.Host[TTx], opts ...Option) (*Module[TTx], error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	base, err := module.NewBase(Name, h)
	if err != nil {
		return nil, err
	}
	base.SetClock(o.clock)
	set, err := parseSettings(h.Settings, h.Demo)
	if err != nil {
		return nil, fmt.Errorf("tracking: %w", err)
	}
	var cs []domain.Carrier
	if o.carriers != nil {
		cs, err = domain.ValidateCarriers(o.carriers)
	} else {
		cs, err = loadCarriers(set.CarriersFile)
	}
	if err != nil {
		return nil, fmt.Errorf("tracking: %w", err)
	}
	st, err := store.New(h.DB)
	if err != nil {
		return nil, fmt.Errorf("tracking: %w", err)
	}
	m := &Module[TTx]{Base: base, set: set, store: st}
	byCode := map[string]*domain.Carrier{}
	clients := map[string]*carrierapi.Client{}
	for i := range cs {
		c := &cs[i]
		m.carriers = append(m.carriers, c)
		byCode[c.Code] = c
		clients[c.Code] = carrierapi.NewClient(c)
	}
	if h.Demo {
		if m.demo, err = newDemo(m.carriers, set.DemoParcels, set.DemoInterval); err != nil {
			return nil, fmt.Errorf("tracking: demo simulators: %w", err)
		}
	}
	met := ingest.NewMetrics()
	if err := base.Register(met.Collectors()...); err != nil {
		return nil, fmt.Errorf("tracking: %w", err)
	}
	m.svc = &ingest.Service[TTx]{Store: st, Carriers: byCode, Events: hostEvents(h), Client: base.Engine().Load,
		Now: base.Clock(), M: met}
	m.workers = &jobs.Workers[TTx]{Svc: m.svc, Clients: clients, Recheck: set.Recheck}
	m.receiver = &web.Receiver[TTx]{Svc: m.svc, Now: base.Clock(), Log: base.Log}
	if err := m.registerRecon(); err != nil {
		return nil, fmt.Errorf("tracking: %w", err)
	}
	return m, nil
}

// Name implements module.Web.
func (m *Module[TTx]) Name() string { return Name }

// Lines implements module.Module.
func (m *Module[TTx]) Lines() []keelmigrate.Line { return Lines(m.DB.Dialect()) }

// Configure adds the carrier-query queue, its workers and every carrier's
// two shares as flow limits.
func (m *Module[TTx]) Configure(cfg *keel.Config) error {
	if cfg.Workers == nil {
		cfg.Workers = keel.NewWorkers()
	}
	if cfg.Queues == nil {
		cfg.Queues = map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: keel.DefaultMaxWorkers}}
	}
	cfg.Queues[ingest.Queue] = keel.QueueConfig{MaxWorkers: m.set.Workers}
	if err := m.workers.Register(cfg.Workers); err != nil {
		return fmt.Errorf("tracking: %w", err)
	}
	cfg.FlowLimits = append(cfg.FlowLimits, jobs.FlowLimits(m.carriers)...)
	return nil
}

// Start binds the engine client, makes sure every carrier has an active
// mapping (version 1 from its configuration), opens the webhook receiver
// and, for `keel dev`, starts the simulators and demo parcels.
func (m *Module[TTx]) Start(ctx context.Context, client *keel.Client[TTx]) error {
	if err := m.Bind(client); err != nil {
		return fmt.Errorf("tracking: %w", err)
	}
	if err := m.ensureMappings(ctx); err != nil {
		return fmt.Errorf("tracking: %w", err)
	}
	run, err := m.Life.Start(ctx)
	if err != nil {
		return fmt.Errorf("tracking: %w", err)
	}
	if m.Demo {
		if err := m.startDemo(run); err != nil {
			return errors.Join(fmt.Errorf("tracking: demo: %w", err), m.Life.Stop(ctx))
		}
	}
	if m.set.WebhookAddr != "" {
		if err := m.listen(run); err != nil {
			return errors.Join(fmt.Errorf("tracking: %w", err), m.Life.Stop(ctx))
		}
	}
	if m.Demo {
		m.Life.Go(m.demo.run)
	}
	return nil
}

func (m *Module[TTx]) listen(run context.Context) error {
	ln, err := (&net.ListenConfig{}).Listen(run, "tcp", m.set.WebhookAddr)
	if err != nil {
		return fmt.Errorf("webhook receiver on %s: %w", m.set.WebhookAddr, err)
	}
	m.hookAddr = ln.Addr().String()
	m.hook = &http.Server{Handler: m.receiver.Handler(), ReadHeaderTimeout: 10 * time.Second}
	m.Log.Info("tracking webhook receiver listening", "addr", m.hookAddr)
	m.Life.Go(func(ctx context.Context) {
		go func() {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = m.hook.Shutdown(sctx)
		}()
		if err := m.hook.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.Log.Error("tracking webhook receiver", "err", err)
		}
	})
	return nil
}

// WebhookURL is the receiver's base URL once it listens ("" otherwise).
func (m *Module[TTx]) WebhookURL() string {
	if m.hookAddr == "" {
		return ""
	}
	return "http://" + m.hookAddr + web.WebhookPrefix
}

// Webhook is the receiver as a handler (to mount elsewhere, and tests).
func (m *Module[TTx]) Webhook() http.Handler { return m.receiver.Handler() }

// UseEvents emits changes to ev (the host's backbone when it has one);
// call it before Start.
func (m *Module[TTx]) UseEvents(ev *keelevents.Events[TTx]) { m.svc.Events = ev }

// Service is the ingestion service.
func (m *Module[TTx]) Service() *ingest.Service[TTx] { return m.svc }

// Store is the module's store.
func (m *Module[TTx]) Store() *store.Store[TTx] { return m.store }

// Carriers lists the configured carriers.
func (m *Module[TTx]) Carriers() []*domain.Carrier { return m.carriers }

// Stop ends the receiver, the simulators and the demo loop.
func (m *Module[TTx]) Stop(ctx context.Context) error {
	err := m.Life.Stop(ctx)
	if m.demo != nil {
		m.demo.close()
	}
	return err
}

func (m *Module[TTx]) ensureMappings(ctx context.Context) error {
	for _, c := range m.carriers {
		v, err := m.store.ActiveVersion(ctx, m.DB, c.Code)
		if err != nil || v > 0 {
			if err != nil {
				return err
			}
			continue
		}
		if err := m.createInitialMapping(ctx, c.Code, c.Codes); err != nil {
			return err
		}
		if err := m.activate(ctx, c.Code, 1, "system:tracking", "initial mapping from configuration", false); err != nil && !errors.Is(err, errNotDraft) {
			return err
		}
	}
	return nil
}
