package alarm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
)

// Lanes. A severe sample is persisted and evaluated at once on its own
// workers, without waiting for a database connection ordinary work holds;
// an ordinary one is persisted in a batch and evaluated from the
// database's backlog, so a flood of ordinary telemetry grows a backlog in
// the database (the authority), never a queue in memory ahead of a severe
// one.
const (
	LaneSevere   = "severe"
	LaneOrdinary = "ordinary"
	LaneReplay   = "replay"
)

// Engine queues and flow keys of notices: severe notices have their own
// queue (reserved workers) and their own share of the channel quota.
const (
	QueueSevere   = "alarm_severe"
	QueueOrdinary = "alarm_notice"
	FlowSevere    = "alarm.webhook.severe"
	FlowOrdinary  = "alarm.webhook.ordinary"
	FlowReplay    = "alarm.webhook.replay"
	FlowSMS       = "alarm.sms.severe"
)

// msg is one message on its way through ingestion; ack is called once it
// is persisted (or deliberately not kept, and counted).
type msg struct {
	s        Sample
	received time.Time
	at       time.Time
	flag     string
	ack      func(error)
}

// Submit takes one MQTT message. ack is called after the message is
// persisted (or quarantined, or counted as sampled); the consumer
// acknowledges it to the broker only then. Submit blocks while the
// ordinary lane's bounded queue is full: the broker then holds the
// message (backpressure), nothing is dropped.
func (m *Module[TTx]) Submit(ctx context.Context, topic string, payload []byte, ack func(error)) {
	now := m.Now()
	m.counters.Add(StageIngest, "in", 1)
	s, err := Parse(topic, payload)
	if err == nil {
		err = m.checkKnown(ctx, &s)
	}
	if err != nil {
		if ReasonOf(err) == "" { // the database, not the message
			ack(err)
			return
		}
		m.quarantine(ctx, topic, payload, err, now, ack)
		return
	}
	at, flag := CorrectClock(s.DeviceAt, now)
	if flag != "" {
		m.counters.Add(StageIngest, "clock_"+flag, 1)
	}
	x := &msg{s: s, received: now, at: at, flag: flag, ack: ack}
	rules := m.rules.forMetric(s.Metric)
	severe := false
	clear := true
	for _, r := range rules {
		lvl := r.Level(s.Value)
		if lvl == SevSevere || m.severeOpen.has(s.Device, r.ID) {
			severe = true
		}
		if lvl > 0 {
			clear = false
		}
	}
	if severe {
		m.counters.Add(StageIngest, "severe_lane", 1)
		if m.severeBusy.Add(1) == 1 {
			m.severeSince.Store(time.Now().UnixMicro()) // a busy spell begins
		}
		select {
		case m.severeCh <- x:
		case <-ctx.Done():
			m.severeBusy.Add(-1)
			ack(ctx.Err())
		}
		return
	}
	lvl := m.pressure.level()
	if s.Debug && lvl >= 1 {
		m.counters.Add(StagePressure, "paused_debug", 1)
		ack(nil)
		return
	}
	if lvl >= 3 && clear && !m.active.has(s.Device, s.Metric) && s.Seq%int64(m.set.SampleEvery) != 0 {
		// Non-critical: a clear reading of a device with nothing pending
		// or open on the metric. Counted, never a severe, first trigger,
		// escalation or recovery (those are not clear or not idle).
		m.counters.Add(StagePressure, "sampled", 1)
		ack(nil)
		return
	}
	select {
	case m.ordCh <- x:
	case <-ctx.Done():
		ack(ctx.Err())
	}
}

// Ingest is Submit waiting for the outcome (API, tests, the simulator's
// direct mode).
func (m *Module[TTx]) Ingest(ctx context.Context, topic string, payload []byte) error {
	done := make(chan error, 1)
	m.Submit(ctx, topic, payload, func(err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *Module[TTx]) checkKnown(ctx context.Context, s *Sample) error {
	known, err := m.devices.knownID(ctx, s.Device)
	if err != nil {
		return err
	}
	if !known {
		return bad(BadUnknownDevice, "device %q is not registered", s.Device)
	}
	for _, r := range m.rules.forMetric(s.Metric) {
		if !r.Plausible(s.Value) {
			return bad(BadValue, "value %v of %s is outside rule %s's plausible range [%v, %v]", s.Value, s.Metric, r.ID, r.MinValue, r.MaxValue)
		}
	}
	return nil
}

func (m *Module[TTx]) quarantine(ctx context.Context, topic string, payload []byte, err error, now time.Time, ack func(error)) {
	m.counters.Add(StageIngest, "quarantined_"+ReasonOf(err), 1)
	p := string(payload)
	if len(p) > 2048 {
		p = p[:2048]
	}
	_, qerr := m.DB.Exec(ctx, m.q.Get("QuarantineInsert"), trunc(topic, 256), toValidUTF8(p), ReasonOf(err)+": "+trunc(err.Error(), 400), now)
	ack(qerr)
}

// severeLoop persists and evaluates severe samples, a few per transaction.
func (m *Module[TTx]) severeLoop(ctx context.Context) {
	for {
		var batch []*msg
		select {
		case x := <-m.severeCh:
			batch = append(batch, x)
		case <-ctx.Done():
			return
		}
	more:
		for len(batch) < 32 {
			select {
			case x := <-m.severeCh:
				batch = append(batch, x)
			default:
				break more
			}
		}
		err := m.retryTx(ctx, func(tx keelsql.Tx[TTx], fx *effects) error {
			sortMsgs(batch)
			for _, x := range batch {
				var n int64
				err := tx.QueryRow(ctx, m.q.Get("TelemetryInsert"), x.s.Device, x.s.Metric, x.s.Boot, x.s.Seq, x.s.Value,
					x.s.DeviceAt, x.at, x.received, x.flag, LaneSevere, true).Scan(&n)
				if errors.Is(err, errNoRows) || isNoRows(err) {
					fx.count(StageIngest, "duplicate")
					continue
				}
				if err != nil {
					return fmt.Errorf("persisting a severe sample: %w", err)
				}
				fx.count(StageIngest, "persisted")
				if err := m.evaluate(ctx, tx, fx, n, &x.s, x.at, x.received); err != nil {
					return err
				}
			}
			return nil
		})
		m.severeBusy.Add(-int64(len(batch)))
		for _, x := range batch {
			x.ack(err)
		}
	}
}

// ordinaryLoop persists ordinary samples in batches (one statement each)
// and wakes the evaluator.
func (m *Module[TTx]) ordinaryLoop(ctx context.Context) {
	for {
		var batch []*msg
		select {
		case x := <-m.ordCh:
			batch = append(batch, x)
		case <-ctx.Done():
			return
		}
		deadline := time.NewTimer(5 * time.Millisecond)
	more:
		for len(batch) < 1000 {
			select {
			case x := <-m.ordCh:
				batch = append(batch, x)
			case <-deadline.C:
				break more
			}
		}
		deadline.Stop()
		type row struct {
			Device     string  `json:"device"`
			Metric     string  `json:"metric"`
			Boot       int64   `json:"boot"`
			Seq        int64   `json:"seq"`
			Value      float64 `json:"value"`
			DeviceUS   int64   `json:"device_us"`
			AtUS       int64   `json:"at_us"`
			ReceivedUS int64   `json:"received_us"`
			ClockFlag  string  `json:"clock_flag"`
		}
		rows := make([]row, len(batch))
		for i, x := range batch {
			rows[i] = row{x.s.Device, x.s.Metric, x.s.Boot, x.s.Seq, x.s.Value, x.s.DeviceAt.UnixMicro(), x.at.UnixMicro(), x.received.UnixMicro(), x.flag}
		}
		b, _ := json.Marshal(rows)
		var n int64
		err := m.ordinaryConn(ctx, func() error {
			var err error
			n, err = m.DB.Exec(ctx, m.q.Get("TelemetryInsertBatch"), string(b))
			return err
		})
		if err == nil {
			m.counters.Add(StageIngest, "persisted", n)
			m.counters.Add(StageIngest, "duplicate", int64(len(batch))-n)
			m.wakeEval()
		}
		for _, x := range batch {
			x.ack(err)
		}
	}
}

// ordinaryConn runs f holding one of the connections ordinary work may
// use, so that the reserved ones stay free for the severe lane.
func (m *Module[TTx]) ordinaryConn(ctx context.Context, f func() error) error {
	// Severe first: while severe samples wait or run, ordinary work does
	// not take the next connection. On SQLite, whose one writer cannot be
	// reserved, this keeps the severe lane ahead of the writer; on
	// PostgreSQL the severe connections are reserved (ordSem leaves them
	// out) but the cores are not. The gate lifts once the severe lane has
	// been busy without a break for severeGate (10 s): a steady stream of severe
	// samples (each busy for longer than the gap between them on a loaded
	// machine) then shares the database with ordinary work instead of
	// holding every ordinary batch back for as long as it lasts, which
	// stalled MQTT ingest.
	for m.severeBusy.Load() > 0 && time.Since(time.UnixMicro(m.severeSince.Load())) < severeGate {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	select {
	case m.ordSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-m.ordSem }()
	return f()
}

// severeGate is how long the severe lane may be busy without a break
// before ordinary work stops waiting for it.
const severeGate = 10 * time.Second

func (m *Module[TTx]) wakeEval() {
	select {
	case m.evalWake <- struct{}{}:
	default:
	}
}

// evalLoop evaluates the ordinary backlog in arrival order.
func (m *Module[TTx]) evalLoop(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		n, err := m.EvaluateBacklog(ctx, m.set.EvalBatch)
		if err != nil && ctx.Err() == nil {
			m.counters.Add(StageEval, "error", 1)
			m.Log.Warn("alarm: evaluating the ordinary backlog", "err", err)
			m.lastEvalErr.Store(err.Error())
		}
		if n > 0 && err == nil {
			if m.set.EvalRate > 0 {
				// Evaluation's capacity, a protection of the database:
				// beyond it the backlog grows (and the watermarks act).
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Duration(n) * time.Second / time.Duration(m.set.EvalRate)):
				}
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-m.evalWake:
		case <-t.C:
		}
	}
}

type pendingRow struct {
	n            int64
	s            Sample
	at, received time.Time
}

// EvaluateBacklog evaluates up to limit samples of the ordinary backlog
// and returns how many it took. Each sample is claimed by a conditional
// update, so that instances sharing the database evaluate it once.
func (m *Module[TTx]) EvaluateBacklog(ctx context.Context, limit int) (int, error) {
	var batch []pendingRow
	err := m.ordinaryConn(ctx, func() error {
		rows, err := m.DB.Query(ctx, m.q.Get("TelemetryPending"), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var p pendingRow
			if err := rows.Scan(&p.n, &p.s.Device, &p.s.Metric, &p.s.Boot, &p.s.Seq, &p.s.Value, &p.at, &p.received); err != nil {
				return err
			}
			batch = append(batch, p)
		}
		return rows.Err()
	})
	if err != nil || len(batch) == 0 {
		return 0, err
	}
	// Lock order: by device and metric, then arrival.
	sort.SliceStable(batch, func(i, j int) bool {
		a, b := batch[i], batch[j]
		if a.s.Device != b.s.Device {
			return a.s.Device < b.s.Device
		}
		if a.s.Metric != b.s.Metric {
			return a.s.Metric < b.s.Metric
		}
		return a.n < b.n
	})
	for start := 0; start < len(batch); start += 50 {
		part := batch[start:min(start+50, len(batch))]
		err := m.ordinaryConn(ctx, func() error {
			return m.retryTx(ctx, func(tx keelsql.Tx[TTx], fx *effects) error {
				for i := range part {
					p := &part[i]
					n, err := tx.Exec(ctx, m.q.Get("TelemetryClaim"), p.n)
					if err != nil {
						return err
					}
					if n == 0 {
						continue // another instance evaluated it
					}
					if err := m.evaluate(ctx, tx, fx, p.n, &p.s, p.at, p.received); err != nil {
						return err
					}
				}
				return nil
			})
		})
		if err != nil {
			return start, err
		}
	}
	m.counters.Add(StageEval, "ordinary", int64(len(batch)))
	return len(batch), nil
}

// effects are what a transaction leaves for after its commit: counts, the
// engine queues to wake, and changes to the in-memory routing sets.
type effects struct {
	counts   map[[2]string]int64
	wake     map[string]bool
	severeOn [][2]string
	severeOf [][2]string
	activeOn [][2]string
	activeOf [][2]string
}

func (fx *effects) count(stage, reason string) {
	if fx.counts == nil {
		fx.counts = map[[2]string]int64{}
	}
	fx.counts[[2]string{stage, reason}]++
}

// retryTx runs f in a transaction, again (up to 5 times) when the
// database refuses it for a conflict or deadlock between writers, and
// applies its effects after the commit.
func (m *Module[TTx]) retryTx(ctx context.Context, f func(tx keelsql.Tx[TTx], fx *effects) error) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		fx := &effects{}
		err = m.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error { return f(tx, fx) })
		if err == nil {
			m.apply(fx)
			return nil
		}
		if ctx.Err() != nil || !retryable(err) {
			return err
		}
		time.Sleep(time.Duration(attempt+1) * 5 * time.Millisecond)
	}
	return err
}

func (m *Module[TTx]) apply(fx *effects) {
	for k, n := range fx.counts {
		m.counters.Add(k[0], k[1], n)
	}
	for _, k := range fx.severeOn {
		m.severeOpen.add(k[0], k[1])
	}
	for _, k := range fx.severeOf {
		m.severeOpen.del(k[0], k[1])
	}
	for _, k := range fx.activeOn {
		m.active.add(k[0], k[1])
	}
	for _, k := range fx.activeOf {
		m.active.del(k[0], k[1])
	}
	if c := m.Engine().Load(); c != nil {
		for q := range fx.wake {
			c.WakeQueue(q)
		}
	}
}

func sortMsgs(b []*msg) {
	sort.SliceStable(b, func(i, j int) bool {
		if b[i].s.Device != b[j].s.Device {
			return b[i].s.Device < b[j].s.Device
		}
		return b[i].s.Metric < b[j].s.Metric
	})
}

// evaluate runs every active rule on the metric over one persisted sample.
func (m *Module[TTx]) evaluate(ctx context.Context, tx keelsql.Tx[TTx], fx *effects, n int64, s *Sample, at, received time.Time) error {
	late := false
	for _, r := range m.rules.forMetric(s.Metric) {
		l, err := m.evaluateRule(ctx, tx, fx, r, s, at, received)
		if err != nil {
			return fmt.Errorf("evaluating rule %s on %s: %w", r.ID, s.Device, err)
		}
		late = late || l
	}
	if late {
		fx.count(StageEval, "late")
		if _, err := tx.Exec(ctx, m.q.Get("TelemetryLate"), n); err != nil {
			return err
		}
	}
	return nil
}

func (m *Module[TTx]) readTrack(ctx context.Context, tx keelsql.Tx[TTx], device string, r *Rule) (Track, error) {
	var t Track
	for i := 0; i < 2; i++ {
		err := tx.QueryRow(ctx, m.q.Get("TrackGet"), device, r.ID).Scan(&t.Device, &t.Rule, &t.RuleVersion, &t.State, &t.Breach,
			&t.Clear, &t.Boot, &t.Seq, &t.InstanceID, &t.LastValue, &t.LastAt, &t.Ver, &t.Severity, &t.Acked)
		if err == nil {
			return t, nil
		}
		if !isNoRows(err) {
			return t, err
		}
		if _, err := tx.Exec(ctx, m.q.Get("TrackInsert"), device, r.ID, r.Version); err != nil {
			return t, err
		}
	}
	return t, fmt.Errorf("track of %s/%s vanished", device, r.ID)
}

// evaluateRule moves one track by compare-and-set and writes what the
// step means: an instance opened, repeated, escalated, recovered, and its
// notices. It reports a late sample.
func (m *Module[TTx]) evaluateRule(ctx context.Context, tx keelsql.Tx[TTx], fx *effects, r *Rule, s *Sample, at, received time.Time) (bool, error) {
	for attempt := 0; attempt < 10; attempt++ {
		t, err := m.readTrack(ctx, tx, s.Device, r)
		if err != nil {
			return false, err
		}
		nt, step, lvl := Evaluate(t, r, s)
		if step == StepLate {
			return true, nil
		}
		if step == StepOpen {
			nt.InstanceID = newInstanceID(at)
		}
		atp := at
		nt.LastAt = &atp
		c, err := tx.Exec(ctx, m.q.Get("TrackCAS"), s.Device, r.ID, t.Ver, nt.RuleVersion, nt.State, nt.Breach, nt.Clear,
			nt.Boot, nt.Seq, nt.InstanceID, nt.LastValue, nt.LastAt)
		if err != nil {
			return false, err
		}
		if c == 0 {
			fx.count(StageEval, "cas_retry")
			continue // a concurrent writer moved it: read and evaluate again
		}
		key := [2]string{s.Device, s.Metric}
		if nt.State == StNormal {
			fx.activeOf = append(fx.activeOf, key)
		} else {
			fx.activeOn = append(fx.activeOn, key)
		}
		return false, m.applyStep(ctx, tx, fx, r, s, t, nt, step, lvl, at, received)
	}
	return false, errConflict
}

var errConflict = errors.New("track kept changing under evaluation")

func (m *Module[TTx]) history(ctx context.Context, tx keelsql.Tx[TTx], id string, at time.Time, from, to, reason string, s *Sample, rv int, actor string) error {
	_, err := tx.Exec(ctx, m.q.Get("HistoryInsert"), id, at, from, to, reason, s.Seq, s.Value, rv, actor)
	return err
}

func (m *Module[TTx]) applyStep(ctx context.Context, tx keelsql.Tx[TTx], fx *effects, r *Rule, s *Sample, t, nt Track, step Step, lvl int,
	at, received time.Time) error {
	fx.count(StageEval, stepNames[step])
	id := t.InstanceID
	switch step {
	case StepNone, StepPending, StepFlap:
		return nil // no instance: a flap in 待确认 returns to 正常 without a notice
	case StepOpen:
		id = nt.InstanceID
		flushed := int64(0)
		if lvl >= SevSevere {
			flushed = 1 // severe instances are notified on their own lane, not in a group
		}
		if _, err := tx.Exec(ctx, m.q.Get("InstanceInsert"), id, s.Device, r.ID, r.Version, lvl, s.Value, at, s.Boot, s.Seq, received, flushed); err != nil {
			return fmt.Errorf("opening an instance: %w", err)
		}
		if err := m.history(ctx, tx, id, at, t.State, StFiring, "threshold", s, r.Version, ""); err != nil {
			return err
		}
		if lvl >= SevSevere {
			fx.severeOn = append(fx.severeOn, [2]string{s.Device, r.ID})
			return m.severeNotice(ctx, tx, fx, id, "firing", lvl, s, r, at, received)
		}
		return m.touchGroup(ctx, tx, r.ID, at)
	case StepRepeat, StepResumeData:
		if _, err := tx.Exec(ctx, m.q.Get("InstanceRepeat"), id, at, s.Value, s.Seq, r.Op); err != nil {
			return err
		}
		if step == StepResumeData {
			if _, err := tx.Exec(ctx, m.q.Get("InstanceResume"), id); err != nil {
				return err
			}
			return m.history(ctx, tx, id, at, StNoData, nt.State, "data_resumed", s, r.Version, "")
		}
		return nil
	case StepEscalate:
		if _, err := tx.Exec(ctx, m.q.Get("InstanceRepeat"), id, at, s.Value, s.Seq, r.Op); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, m.q.Get("InstanceEscalate"), id, lvl); err != nil {
			return err
		}
		if t.State == StNoData {
			if _, err := tx.Exec(ctx, m.q.Get("InstanceResume"), id); err != nil {
				return err
			}
		}
		if err := m.history(ctx, tx, id, at, t.State, nt.State, fmt.Sprintf("severity_%d", lvl), s, r.Version, ""); err != nil {
			return err
		}
		if lvl >= SevSevere {
			fx.severeOn = append(fx.severeOn, [2]string{s.Device, r.ID})
			return m.severeNotice(ctx, tx, fx, id, "escalated", lvl, s, r, at, received)
		}
		return m.touchGroup(ctx, tx, r.ID, at)
	case StepClearing:
		if _, err := tx.Exec(ctx, m.q.Get("InstanceClearing"), id, at, s.Value, s.Seq); err != nil {
			return err
		}
		if t.State == StNoData {
			if _, err := tx.Exec(ctx, m.q.Get("InstanceResume"), id); err != nil {
				return err
			}
		}
		return nil
	case StepRecover:
		if _, err := tx.Exec(ctx, m.q.Get("InstanceRecover"), id, at, s.Value, s.Seq); err != nil {
			return err
		}
		if err := m.history(ctx, tx, id, at, t.State, StRecovered, "recovery_windows", s, r.Version, ""); err != nil {
			return err
		}
		if t.Severity >= SevSevere || m.severeOpen.has(s.Device, r.ID) {
			fx.severeOf = append(fx.severeOf, [2]string{s.Device, r.ID})
		}
		inst, err := m.instanceTx(ctx, tx, id)
		if err != nil {
			return err
		}
		if inst.PeakSeverity >= SevSevere {
			return m.severeNotice(ctx, tx, fx, id, "recovered", inst.PeakSeverity, s, r, at, received)
		}
		return m.touchGroup(ctx, tx, r.ID, at)
	}
	return nil
}

var stepNames = map[Step]string{StepLate: "late", StepNone: "normal", StepPending: "pending", StepFlap: "flap", StepOpen: "open",
	StepRepeat: "repeat", StepEscalate: "escalate", StepClearing: "clearing", StepRecover: "recover", StepResumeData: "resume_data"}

func newInstanceID(at time.Time) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return "AL" + at.UTC().Format("060102") + hex.EncodeToString(b[:])
}

// routeSet is a set of device/key pairs shared by the lanes.
type routeSet struct {
	mu sync.RWMutex
	m  map[[2]string]struct{}
}

func newRouteSet() *routeSet { return &routeSet{m: map[[2]string]struct{}{}} }

func (r *routeSet) has(a, b string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.m[[2]string{a, b}]
	return ok
}
func (r *routeSet) add(a, b string) { r.mu.Lock(); r.m[[2]string{a, b}] = struct{}{}; r.mu.Unlock() }
func (r *routeSet) del(a, b string) { r.mu.Lock(); delete(r.m, [2]string{a, b}); r.mu.Unlock() }

// engineClient is the bound engine client or an error before Start.
func (m *Module[TTx]) engineClient() (*keel.Client[TTx], error) { return m.Client() }
