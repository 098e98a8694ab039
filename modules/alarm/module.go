// Package alarm is IoT alarming as a Keel module: telemetry arrives over
// MQTT (QoS 1, a shared subscription across instances, each message
// persisted before it is acknowledged), is deduplicated by device, metric,
// boot epoch and device sequence, and moves per (device, rule) tracks and
// alarm instances by conditional updates; severe alarms bypass the
// aggregation window on their own lane, queue and quota, ordinary ones are
// grouped Alertmanager-style; notices are their own records delivered by
// engine jobs on flow keys; backpressure degrades by value and a storm is
// replayed on a staircase. See docs/alarm.md.
package alarm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsql/sqlfile"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
)

// Module is the alarm module on a database whose transactions are TTx.
type Module[TTx any] struct {
	*module.Base[TTx]
	set      *Settings
	q        sqlfile.Set
	counters *Counters
	rules    ruleCache
	devices  *deviceCache

	severeOpen *routeSet // (device, rule) with a severe instance open
	active     *routeSet // (device, metric) with a track not normal

	severeCh   chan *msg
	severeBusy atomic.Int64
	// severeSince is when the severe lane's current busy spell began
	// (Unix µs).
	severeSince atomic.Int64
	ordCh       chan *msg
	ordSem      chan struct{}
	evalWake    chan struct{}

	pressure pressure
	storm    stormState
	latency  latencies
	replayMu sync.Mutex
	http     *http.Client
	hookURL  atomic.Pointer[string]

	consumers   []*Consumer
	broker      *EmbeddedBroker
	fleet       *Fleet
	services    *module.Services
	started     atomic.Bool
	beforeAck   func()
	lastEvalErr atomic.Value
}

var _ module.Module[any] = (*Module[any])(nil)

// New builds the module; settings are described in docs/alarm.md.
func New[TTx any](h *module.Host[TTx]) (*Module[TTx], error) {
	base, err := module.NewBase(Name, h)
	if err != nil {
		return nil, err
	}
	set, err := parseSettings(h.Settings, h.Demo)
	if err != nil {
		return nil, fmt.Errorf("alarm: %w", err)
	}
	q, err := base.Queries(queryFiles, "queries")
	if err != nil {
		return nil, fmt.Errorf("alarm: %w", err)
	}
	m := &Module[TTx]{Base: base, set: set, q: q, counters: newCounters(), severeOpen: newRouteSet(), active: newRouteSet(),
		severeCh: make(chan *msg, 1024), ordCh: make(chan *msg, 4096),
		ordSem: make(chan struct{}, set.PoolSize-set.ReservedConns), evalWake: make(chan struct{}, 1),
		http: &http.Client{Timeout: 15 * time.Second}, services: h.Services}
	m.pressure.forced.Store(-1)
	m.devices = &deviceCache{known: map[string]bool{}, unknown: map[string]time.Time{}, lookup: m.deviceExists}
	if err := base.Register(m.counters.vec); err != nil {
		return nil, fmt.Errorf("alarm: %w", err)
	}
	if h.Recon != nil {
		if err := h.Recon.Register(&reconciler[TTx]{m: m}); err != nil {
			return nil, fmt.Errorf("alarm: %w", err)
		}
	}
	return m, nil
}

// Name implements module.Web.
func (m *Module[TTx]) Name() string { return Name }

// Lines implements module.Module.
func (m *Module[TTx]) Lines() []keelmigrate.Line { return Lines(m.DB.Dialect()) }

// Settings are the module's parsed settings.
func (m *Module[TTx]) Settings() *Settings { return m.set }

// Configure adds the two notice queues (severe workers reserved), the
// delivery worker and the channel's quota split as flow limits.
func (m *Module[TTx]) Configure(cfg *keel.Config) error {
	if cfg.Workers == nil {
		cfg.Workers = keel.NewWorkers()
	}
	if cfg.Queues == nil {
		cfg.Queues = map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: keel.DefaultMaxWorkers}}
	}
	cfg.Queues[QueueSevere] = keel.QueueConfig{MaxWorkers: m.set.SevereWorkers}
	cfg.Queues[QueueOrdinary] = keel.QueueConfig{MaxWorkers: m.set.OrdinaryWorkers}
	if err := keel.AddWorkerSafely[NoticeArgs](cfg.Workers, keel.WorkerFunc[NoticeArgs](m.deliver)); err != nil {
		return fmt.Errorf("alarm: %w", err)
	}
	top := m.set.ReplayRates[len(m.set.ReplayRates)-1]
	cfg.FlowLimits = append(cfg.FlowLimits,
		keeltype.FlowLimit{Pattern: FlowSevere, Rate: m.set.SevereRate, Burst: int(m.set.SevereRate)},
		keeltype.FlowLimit{Pattern: FlowOrdinary, Rate: m.set.OrdinaryRate, Burst: int(m.set.OrdinaryRate)},
		keeltype.FlowLimit{Pattern: FlowReplay, Rate: float64(top), Burst: top},
		keeltype.FlowLimit{Pattern: FlowSMS, Rate: m.set.SMSRate, Burst: int(m.set.SMSRate)})
	return nil
}

// Start binds the client, writes version 1 of the default rules, loads
// the routing sets and starts the lanes, the evaluator, the flusher, the
// watermark monitor, the consumers and (keel dev) the embedded broker and
// a small fleet.
func (m *Module[TTx]) Start(ctx context.Context, client *keel.Client[TTx]) error {
	if err := m.Bind(client); err != nil {
		return fmt.Errorf("alarm: %w", err)
	}
	if err := m.ensureRules(ctx); err != nil {
		return fmt.Errorf("alarm: %w", err)
	}
	if err := m.loadRouting(ctx); err != nil {
		return fmt.Errorf("alarm: %w", err)
	}
	run, err := m.Life.Start(ctx)
	if err != nil {
		return fmt.Errorf("alarm: %w", err)
	}
	m.Life.Go(m.severeLoop)
	m.Life.Go(m.severeLoop)
	// One persisting loop per consumer: a batch's insert and commit
	// overlap the next batches' instead of queueing behind them (each
	// message is acknowledged after its own batch commits). SQLite has
	// one writer, and without consumers there is one submitter: one loop.
	loops := 1
	if m.set.MQTTURL != "" && m.DB.Dialect() != "sqlite" {
		loops = max(1, m.set.Consumers)
	}
	for i := 0; i < loops; i++ {
		m.Life.Go(m.ordinaryLoop)
	}
	m.Life.Go(m.evalLoop)
	m.Life.Go(m.housekeeping)
	url := m.set.MQTTURL
	if m.Demo && url == "" {
		b, err := StartEmbeddedBroker(m.set.EmbeddedAddr)
		if err != nil {
			// The port is taken (a second keel dev): any free one.
			m.Log.Warn("alarm: embedded broker address taken; using a free port", "addr", m.set.EmbeddedAddr, "err", err)
			b, err = StartEmbeddedBroker("127.0.0.1:0")
		}
		if err != nil {
			return errors.Join(fmt.Errorf("alarm: embedded broker: %w", err), m.Life.Stop(ctx))
		}
		m.broker = b
		url = b.URL()
		m.Log.Info("alarm: embedded MQTT broker for keel dev", "url", url)
	}
	if url != "" {
		for i := 0; i < m.set.Consumers; i++ {
			c, err := StartConsumer(run, ConsumerConfig{URL: url, ClientID: fmt.Sprintf("%s-%d", m.set.ClientPrefix, i), Group: m.set.ShareGroup,
				Submit: m.Submit, Log: m.Log, BeforeAck: m.beforeAck})
			if err != nil {
				return errors.Join(fmt.Errorf("alarm: consumer: %w", err), m.stopAll(ctx))
			}
			m.consumers = append(m.consumers, c)
		}
	}
	if m.Demo && url != "" && m.set.DemoDevices > 0 {
		f, err := m.demoFleet(run, url)
		if err != nil {
			return errors.Join(fmt.Errorf("alarm: demo fleet: %w", err), m.stopAll(ctx))
		}
		m.fleet = f
	}
	m.started.Store(true)
	return nil
}

// Stop ends the fleet, the consumers, the loops and the broker.
func (m *Module[TTx]) Stop(ctx context.Context) error { return m.stopAll(ctx) }

func (m *Module[TTx]) stopAll(ctx context.Context) error {
	if m.fleet != nil {
		m.fleet.Stop()
	}
	for _, c := range m.consumers {
		c.Stop()
	}
	err := m.Life.Stop(ctx)
	_ = m.flushCounters(context.WithoutCancel(ctx))
	if m.broker != nil {
		m.broker.Close()
	}
	return err
}

// housekeeping: counters to the database, the watermarks, due group
// flushes, 无数据 tracks and rule reloads.
func (m *Module[TTx]) housekeeping(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := m.measure(ctx); err != nil && ctx.Err() == nil {
			m.Log.Warn("alarm: watermarks", "err", err)
		}
		if err := m.ordinaryConn(ctx, func() error { _, err := m.FlushGroups(ctx); return err }); err != nil && ctx.Err() == nil {
			m.Log.Warn("alarm: group flush", "err", err)
		}
		if i%4 == 0 {
			if err := m.ordinaryConn(ctx, func() error { return m.flushCounters(ctx) }); err != nil && ctx.Err() == nil {
				m.Log.Warn("alarm: counters", "err", err)
			}
			if _, err := m.ScanNoData(ctx); err != nil && ctx.Err() == nil {
				m.Log.Warn("alarm: no-data scan", "err", err)
			}
		}
		if i%40 == 0 {
			if err := m.loadRules(ctx); err != nil && ctx.Err() == nil {
				m.Log.Warn("alarm: rules", "err", err)
			}
		}
	}
}

func (m *Module[TTx]) ensureRules(ctx context.Context) error {
	now := m.Now()
	for _, r := range DefaultRules() {
		if _, err := m.DB.Exec(ctx, m.q.Get("RuleInsertInitial"), r.ID, r.Metric, r.Op, r.Warn, r.Crit, r.Severity, r.Hold, r.Recover,
			r.NoDataSecs, r.MinValue, r.MaxValue, r.Note, now, "system:alarm"); err != nil {
			return fmt.Errorf("default rule %s: %w", r.ID, err)
		}
	}
	return m.loadRules(ctx)
}

func (m *Module[TTx]) loadRules(ctx context.Context) error {
	rows, err := m.DB.Query(ctx, m.q.Get("RulesActive"))
	if err != nil {
		return err
	}
	defer rows.Close()
	var rs []*Rule
	for rows.Next() {
		var r Rule
		if err := rows.Scan(&r.ID, &r.Version, &r.Metric, &r.Op, &r.Warn, &r.Crit, &r.Severity, &r.Hold, &r.Recover, &r.NoDataSecs,
			&r.MinValue, &r.MaxValue, &r.Note, &r.CreatedAt, &r.CreatedBy); err != nil {
			return err
		}
		rs = append(rs, &r)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	m.rules.set(rs)
	return nil
}

// Rules lists the active rule versions.
func (m *Module[TTx]) Rules() []*Rule { return m.rules.list() }

// PutRule writes a new version of a rule (the old one retired) and audits it.
func (m *Module[TTx]) PutRule(ctx context.Context, r Rule, actor string) (int, error) {
	if err := r.Validate(); err != nil {
		return 0, fmt.Errorf("%w: %v", keeltype.ErrInvalidArgument, err)
	}
	var v int
	err := m.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		if _, err := tx.Exec(ctx, m.q.Get("RuleRetire"), r.ID); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, m.q.Get("RuleInsertNext"), r.ID, r.Metric, r.Op, r.Warn, r.Crit, r.Severity, r.Hold, r.Recover,
			r.NoDataSecs, r.MinValue, r.MaxValue, r.Note, m.Now(), actor).Scan(&v); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, m.q.Get("AuditInsert"), m.Now(), actor, "rule_version", r.ID, fmt.Sprintf("版本 %d", v))
		return err
	})
	if err != nil {
		return 0, err
	}
	return v, m.loadRules(ctx)
}

func (m *Module[TTx]) loadRouting(ctx context.Context) error {
	rows, err := m.DB.Query(ctx, m.q.Get("InstanceOpenSevere"))
	if err != nil {
		return err
	}
	for rows.Next() {
		var d, r string
		if err := rows.Scan(&d, &r); err != nil {
			rows.Close()
			return err
		}
		m.severeOpen.add(d, r)
	}
	rows.Close()
	rows, err = m.DB.Query(ctx, m.q.Get("TracksActive"))
	if err != nil {
		return err
	}
	defer rows.Close()
	byID := map[string]string{}
	for _, r := range m.rules.list() {
		byID[r.ID] = r.Metric
	}
	for rows.Next() {
		var d, r string
		if err := rows.Scan(&d, &r); err != nil {
			return err
		}
		m.active.add(d, byID[r])
	}
	return rows.Err()
}

func (m *Module[TTx]) deviceExists(ctx context.Context, id string) (bool, error) {
	var a, b, c string
	var t time.Time
	err := m.DB.QueryRow(ctx, m.q.Get("DeviceGet"), id).Scan(&a, &b, &c, &t)
	if isNoRows(err) {
		return false, nil
	}
	return err == nil, err
}

// RegisterDevice makes a device known (idempotent).
func (m *Module[TTx]) RegisterDevice(ctx context.Context, id, name, gateway string) error {
	if !idPattern.MatchString(id) || gateway != "" && !idPattern.MatchString(gateway) {
		return fmt.Errorf("%w: device and gateway ids are [A-Za-z0-9_.-]{1,64}", keeltype.ErrInvalidArgument)
	}
	if _, err := m.DB.Exec(ctx, m.q.Get("DeviceUpsert"), id, name, gateway, m.Now()); err != nil {
		return err
	}
	m.devices.add(id)
	return nil
}

// ScanNoData moves open instances whose device went silent to 无数据:
// missing data is not a recovery.
func (m *Module[TTx]) ScanNoData(ctx context.Context) (int, error) {
	moved := 0
	for _, r := range m.rules.list() {
		if r.NoDataSecs == 0 {
			continue
		}
		before := m.Now().Add(-time.Duration(r.NoDataSecs) * time.Second)
		rows, err := m.DB.Query(ctx, m.q.Get("TrackNoData"), before, r.ID)
		if err != nil {
			return moved, err
		}
		type cand struct {
			device, inst string
			ver          int64
		}
		var cs []cand
		for rows.Next() {
			var c cand
			var rule string
			if err := rows.Scan(&c.device, &rule, &c.inst, &c.ver); err != nil {
				rows.Close()
				return moved, err
			}
			cs = append(cs, c)
		}
		rows.Close()
		for _, c := range cs {
			err := m.retryTx(ctx, func(tx keelsql.Tx[TTx], fx *effects) error {
				n, err := tx.Exec(ctx, m.q.Get("TrackToNoData"), c.device, r.ID, c.ver)
				if err != nil || n == 0 {
					return err
				}
				if _, err := tx.Exec(ctx, m.q.Get("InstanceNoData"), c.inst); err != nil {
					return err
				}
				fx.count(StageEval, "nodata")
				_, err = tx.Exec(ctx, m.q.Get("HistoryInsert"), c.inst, m.Now(), StFiring, StNoData, "no_data", 0, 0, r.Version, "")
				return err
			})
			if err != nil {
				return moved, err
			}
			moved++
		}
	}
	return moved, nil
}

// Ack acknowledges a firing instance (告警中 → 已确认), audited.
func (m *Module[TTx]) Ack(ctx context.Context, id, actor, comment string) error {
	if actor == "" {
		return fmt.Errorf("%w: an acknowledgement needs its operator", keeltype.ErrInvalidArgument)
	}
	return m.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		n, err := tx.Exec(ctx, m.q.Get("InstanceAck"), id, m.Now(), actor, comment)
		if err != nil {
			return err
		}
		if n == 0 {
			i, err := m.instanceTx(ctx, tx, id)
			if isNoRows(err) {
				return keeltype.ErrNotFound
			}
			if err != nil {
				return err
			}
			if i.State == StAcked {
				return nil // acknowledged already: the same outcome
			}
			return fmt.Errorf("%w: instance %s is %s", keeltype.ErrInvalidState, id, StateZH(i.State))
		}
		if _, err := tx.Exec(ctx, m.q.Get("TrackAck"), id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, m.q.Get("HistoryInsert"), id, m.Now(), StFiring, StAcked, "ack", 0, 0, 0, actor); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, m.q.Get("AuditInsert"), m.Now(), actor, "ack", id, comment)
		return err
	})
}

// Silence mutes notices (never state changes) of a device and/or rule
// from start until end; it needs its creator and a comment.
type Silence struct {
	ID        int64      `json:"id"`
	Device    string     `json:"device,omitempty"`
	Rule      string     `json:"rule,omitempty"`
	StartsAt  time.Time  `json:"starts_at"`
	EndsAt    time.Time  `json:"ends_at"`
	CreatedBy string     `json:"created_by"`
	Comment   string     `json:"comment"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiredBy string     `json:"expired_by,omitempty"`
	ExpiredAt *time.Time `json:"expired_at,omitempty"`
}

// AddSilence validates and writes a silence, audited.
func (m *Module[TTx]) AddSilence(ctx context.Context, s Silence) (int64, error) {
	switch {
	case s.Device == "" && s.Rule == "":
		return 0, fmt.Errorf("%w: a silence names a device, a rule or both", keeltype.ErrInvalidArgument)
	case s.CreatedBy == "" || len(s.Comment) < 4:
		return 0, fmt.Errorf("%w: a silence needs its creator and a comment", keeltype.ErrInvalidArgument)
	case !s.EndsAt.After(s.StartsAt) || s.EndsAt.Sub(s.StartsAt) > 30*24*time.Hour:
		return 0, fmt.Errorf("%w: a silence ends after it starts, within 30 days", keeltype.ErrInvalidArgument)
	}
	var id int64
	err := m.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		if err := tx.QueryRow(ctx, m.q.Get("SilenceInsert"), s.Device, s.Rule, s.StartsAt, s.EndsAt, s.CreatedBy, s.Comment, m.Now()).Scan(&id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, m.q.Get("AuditInsert"), m.Now(), s.CreatedBy, "silence", fmt.Sprintf("silence:%d", id), s.Comment)
		return err
	})
	return id, err
}

// ExpireSilence ends a silence now, audited.
func (m *Module[TTx]) ExpireSilence(ctx context.Context, id int64, actor string) error {
	n, err := m.DB.Exec(ctx, m.q.Get("SilenceExpire"), id, m.Now(), actor)
	if err != nil {
		return err
	}
	if n == 0 {
		return keeltype.ErrNotFound
	}
	m.audit(ctx, actor, "silence_expire", fmt.Sprintf("silence:%d", id), "")
	return nil
}

// Silences lists silences, newest first.
func (m *Module[TTx]) Silences(ctx context.Context, limit int) ([]Silence, error) {
	rows, err := m.DB.Query(ctx, m.q.Get("SilenceList"), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Silence
	for rows.Next() {
		var s Silence
		if err := rows.Scan(&s.ID, &s.Device, &s.Rule, &s.StartsAt, &s.EndsAt, &s.CreatedBy, &s.Comment, &s.CreatedAt, &s.ExpiredBy, &s.ExpiredAt); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// Ticket is an on-call ticket: a notice its channel could not deliver.
type Ticket struct {
	ID         int64      `json:"id"`
	NoticeID   int64      `json:"notice_id"`
	InstanceID string     `json:"instance_id"`
	Reason     string     `json:"reason"`
	State      string     `json:"state"`
	CreatedAt  time.Time  `json:"created_at"`
	TakenBy    string     `json:"taken_by,omitempty"`
	TakenAt    *time.Time `json:"taken_at,omitempty"`
}

// Tickets lists tickets, newest first.
func (m *Module[TTx]) Tickets(ctx context.Context, limit int) ([]Ticket, error) {
	rows, err := m.DB.Query(ctx, m.q.Get("TicketList"), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Ticket
	for rows.Next() {
		var t Ticket
		if err := rows.Scan(&t.ID, &t.NoticeID, &t.InstanceID, &t.Reason, &t.State, &t.CreatedAt, &t.TakenBy, &t.TakenAt); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// TakeTicket records that a person took the ticket over, audited.
func (m *Module[TTx]) TakeTicket(ctx context.Context, id int64, actor string) error {
	n, err := m.DB.Exec(ctx, m.q.Get("TicketTake"), id, actor, m.Now())
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: ticket %d is not open", keeltype.ErrInvalidState, id)
	}
	m.audit(ctx, actor, "ticket_take", fmt.Sprintf("ticket:%d", id), "")
	return nil
}
