package delivery

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/modules/delivery/carrierlink"
	"github.com/keelwork/keel/modules/delivery/cmpp"
)

// LineName names the module's migration line.
const LineName = "delivery"

//go:embed migrations/postgres/*.sql migrations/sqlite/*.sql
var migrationFiles embed.FS

// Lines returns the delivery migration line for a dialect, in the shape
// testdb.Options.Lines and keelmigrate.Config.Lines take.
func Lines(dialect string) []keelmigrate.Line {
	return keelmigrate.DialectLines(LineName, migrationFiles, "migrations", dialect)
}

// Module is the delivery module on a database whose transactions are TTx.
type Module[TTx any] struct {
	h        *module.Host[TTx]
	base     *module.Base[TTx]
	set      settings
	log      *slog.Logger
	st       *store[TTx]
	apps     *appCache
	links    *links
	track    *tracker
	pace     *pacer
	acks     *applier[TTx]
	claims   *claimer[TTx]
	http     *httpPusher
	pres     *presence
	instance string
	keys     atomic.Pointer[[]string]
	client   *module.Binding[TTx] // the engine client, bound by Start
	beatNow  chan struct{}

	mu    sync.Mutex
	tasks []int64

	srv  *cmpp.Server
	up   *carrierlink.Link
	demo *demo[TTx]
}

var _ module.Module[any] = (*Module[any])(nil)

// New builds the module from the host's database, logger and settings.
func New[TTx any](h *module.Host[TTx]) (*Module[TTx], error) {
	base, err := module.NewBase(LineName, h)
	if err != nil {
		return nil, err
	}
	set, err := parseSettings(h.Settings)
	if err != nil {
		return nil, err
	}
	st, err := newStore(h.DB)
	if err != nil {
		return nil, err
	}
	log := base.Log
	m := &Module[TTx]{
		h: h, base: base, client: base.Engine(), set: set, log: log, st: st, apps: newAppCache(), links: newLinks(set.Window),
		track: newTracker(), pace: newPacer(), pres: &presence{}, beatNow: make(chan struct{}, 1),
	}
	if err := base.Register(m.collectors()...); err != nil {
		return nil, fmt.Errorf("delivery: %w", err)
	}
	if err := m.offerSMS(h); err != nil {
		return nil, fmt.Errorf("delivery: %w", err)
	}
	m.acks = newApplier(st, m.client.Load, log)
	m.claims = newClaimer(st, log)
	m.http = newHTTPPusher(set.HTTPTimeout, set.HTTPBatch, m.acks.conclude)
	return m, nil
}

// Name implements module.Web.
func (m *Module[TTx]) Name() string { return LineName }

// Lines implements module.Module.
func (m *Module[TTx]) Lines() []keelmigrate.Line { return Lines(m.h.DB.Dialect()) }

// Configure registers the module's workers and its queue, restricted to
// the flow keys this instance holds.
func (m *Module[TTx]) Configure(cfg *keel.Config) error {
	if cfg.Workers == nil {
		cfg.Workers = keel.NewWorkers()
	}
	if err := keel.AddWorkerSafely[PushArgs](cfg.Workers, &pushWorker[TTx]{m}); err != nil {
		return err
	}
	if err := keel.AddWorkerSafely[RequeueArgs](cfg.Workers, &requeueWorker[TTx]{m}); err != nil {
		return err
	}
	if err := keel.AddWorkerSafely[ForwardArgs](cfg.Workers, &forwardWorker[TTx]{m}); err != nil {
		return err
	}
	if err := keel.AddWorkerSafely[IngestArgs](cfg.Workers, &ingestWorker[TTx]{m}); err != nil {
		return err
	}
	if cfg.Queues == nil {
		cfg.Queues = map[string]keel.QueueConfig{keel.DefaultQueue: {}}
	}
	cfg.Queues[QueueName] = keel.QueueConfig{MaxWorkers: m.set.Workers, FlowKeys: m.heldKeys}
	cfg.Queues[QueueAux] = keel.QueueConfig{MaxWorkers: 20}
	return nil
}

// Start runs the gateway, the heartbeat and (with Host.Demo) the demo.
func (m *Module[TTx]) Start(ctx context.Context, client *keel.Client[TTx]) error {
	if err := m.client.Bind(client); err != nil {
		return err
	}
	run, err := m.base.Life.Start(ctx)
	if err != nil {
		return fmt.Errorf("delivery: %w", err)
	}
	m.instance = m.set.Instance
	if m.instance == "" {
		m.instance = client.ID()
	}
	m.pres.self = m.instance
	m.acks.start(run)
	m.claims.start(run)
	m.beat(ctx)
	if err := m.syncLimits(ctx); err != nil {
		m.log.Warn("delivery: application rate limits", "err", err)
	}
	if err := m.startCarrierSim(run); err != nil {
		return errors.Join(err, m.Stop(ctx))
	}
	if err := m.startGateway(ctx); err != nil {
		return errors.Join(err, m.Stop(ctx))
	}
	m.goRun(func() { m.beatLoop(run) })
	if m.set.UpstreamAddr != "" {
		m.up = newCarrierLink(m, m.set.UpstreamAddr, m.set.UpstreamUser, m.set.UpstreamSecret)
		m.goRun(func() { m.up.Run(run) })
	}
	if m.h.Demo {
		if err := m.startDemo(run); err != nil {
			m.log.Error("delivery: demo", "err", err)
		}
	}
	return nil
}

// goRun runs f in the module's run; Stop waits for it.
func (m *Module[TTx]) goRun(f func()) { m.base.Life.Go(func(context.Context) { f() }) }

// presenceDropTimeout bounds Stop's last statement, the presence drop.
const presenceDropTimeout = 2 * time.Second

// Stop ends the gateway and background work; held connections close, so
// their customers reconnect to another instance.
func (m *Module[TTx]) Stop(ctx context.Context) error {
	if !m.base.Life.Running() {
		return nil
	}
	var errs []error
	if m.demo != nil {
		m.demo.stop()
	}
	if m.srv != nil {
		if err := m.srv.Close(ctx); err != nil && !errors.Is(err, cmpp.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	stopped := m.base.Life.Stop(ctx) // cancels the run; the helpers below see it end
	m.http.Stop()
	m.claims.stop()
	m.acks.stop()
	if stopped != nil {
		errs = append(errs, stopped)
	}
	// The presence drop lets another instance take these customers at
	// once instead of after the presence expires, so it is tried even when
	// the stop's own time is spent; but only briefly: on SQLite it queues
	// for the one write connection behind the engine's claims, and an
	// unbounded wait there once held a stop past its bound.
	dropCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), presenceDropTimeout)
	defer cancel()
	if err := m.st.beat(dropCtx, m.instance, nil); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Addr is the CMPP gateway's listen address (nil without a gateway).
func (m *Module[TTx]) Addr() string {
	if m.srv == nil || m.srv.Addr() == nil {
		return ""
	}
	return m.srv.Addr().String()
}

// syncLimits gives every application's own pushes its rate ("app:<id>"
// in the delivery queue); an existing equal limit is left alone.
func (m *Module[TTx]) syncLimits(ctx context.Context) error {
	c, err := m.client.Client()
	if err != nil {
		return err
	}
	have, err := c.FlowLimits(ctx)
	if err != nil {
		return err
	}
	cur := map[string]*keeltype.FlowLimit{}
	for _, l := range have {
		if l.Queue == QueueName {
			cur[l.Pattern] = l
		}
	}
	for _, a := range m.apps.all() {
		if l, ok := cur[a.FlowKey()]; ok && l.Rate == a.Rate {
			continue
		}
		if err := m.setAppLimit(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

func (m *Module[TTx]) setAppLimit(ctx context.Context, a *Application) error {
	c, err := m.client.Client()
	if err != nil {
		return err
	}
	_, err = c.FlowLimitSet(ctx, &keeltype.FlowLimit{Pattern: a.FlowKey(), Queue: QueueName, Rate: a.Rate},
		fmt.Sprintf("delivery: rate of application %d (%s)", a.ID, a.Name))
	return err
}

// keyRate is the rate the engine holds claims of key to (per second; 0:
// none), which the pacer carries to the customer's side. It is the
// engine's own limit for the key, not the application's setting, so a key
// whose limit was lifted (or a task's key, limited by the task) is paced by
// what actually spaced its claims: an unlimited key's writes go out at
// once rather than a pacing delay after their claim.
func (m *Module[TTx]) keyRate(ctx context.Context, key string) float64 {
	c := m.client.Load()
	if c == nil {
		return 0
	}
	l, err := c.FlowLimitOf(ctx, key, QueueName)
	if err != nil || l == nil {
		return 0
	}
	return l.Rate
}

// jobTimeout bounds one run of a delivery job: the window wait, the write
// and the inline wait for an ACK or an HTTP answer.
func (m *Module[TTx]) jobTimeout() time.Duration {
	return windowWait + m.set.HTTPTimeout + m.set.AckInline + 30*time.Second
}
