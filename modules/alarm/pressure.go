package alarm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelwork/keel/keelsql"
)

// Backpressure levels, from the ordinary backlog (samples persisted and
// not yet evaluated) against the watermarks:
//
//	0  below low_water: nothing degraded
//	1  low_water: debug telemetry paused (counted)
//	2  high_water: ordinary windows widened 4x, repeats not sent
//	3  storm_water: non-critical telemetry sampled (counted); the storm
//	   meta-alarm opens and ordinary notices are held for the replay
//
// Severe samples, first triggers, escalations and recoveries are never
// shed at any level.
type pressure struct {
	lvl     atomic.Int32
	backlog atomic.Int64
	oldest  atomic.Int64 // age of the oldest unevaluated sample, ms
	forced  atomic.Int32 // tests and operators: -1 none
}

func (p *pressure) level() int {
	if f := p.forced.Load(); f >= 0 {
		return int(f)
	}
	return int(p.lvl.Load())
}

// ForcePressure pins the backpressure level (-1 releases it): the storm
// drill and tests use it.
func (m *Module[TTx]) ForcePressure(level int) { m.pressure.forced.Store(int32(level)) }

// Pressure is the backpressure state for the console and API.
type Pressure struct {
	Level      int    `json:"level"`
	Backlog    int64  `json:"backlog"`
	OldestMS   int64  `json:"oldest_ms"`
	LowWater   int64  `json:"low_water"`
	HighWater  int64  `json:"high_water"`
	StormWater int64  `json:"storm_water"`
	SevereP99  int64  `json:"severe_p99_ms"`
	SevereP50  int64  `json:"severe_p50_ms"`
	Storm      *Storm `json:"storm,omitempty"`
}

// Pressure reads it.
func (m *Module[TTx]) Pressure() Pressure {
	p50, p99 := m.latency.quantiles()
	return Pressure{Level: m.pressure.level(), Backlog: m.pressure.backlog.Load(), OldestMS: m.pressure.oldest.Load(),
		LowWater: m.set.LowWater, HighWater: m.set.HighWater, StormWater: m.set.StormWater,
		SevereP50: p50.Milliseconds(), SevereP99: p99.Milliseconds(), Storm: m.storm.current()}
}

// measure reads the backlog and moves the level and the storm meta-alarm.
func (m *Module[TTx]) measure(ctx context.Context) error {
	var n int64
	var oldest time.Time
	if err := m.DB.QueryRow(ctx, m.q.Get("TelemetryBacklog")).Scan(&n, &oldest); err != nil {
		return err
	}
	m.pressure.backlog.Store(n)
	age := int64(0)
	if n > 0 && !oldest.IsZero() {
		age = max(0, m.Now().Sub(oldest).Milliseconds())
	}
	m.pressure.oldest.Store(age)
	lvl := 0
	switch {
	case n >= m.set.StormWater:
		lvl = 3
	case n >= m.set.HighWater:
		lvl = 2
	case n >= m.set.LowWater:
		lvl = 1
	}
	if old := m.pressure.lvl.Swap(int32(lvl)); int(old) != lvl {
		m.counters.Add(StagePressure, fmt.Sprintf("level_%d", lvl), 1)
		m.Log.Info("alarm backpressure level", "level", lvl, "backlog", n)
	}
	return m.stormStep(ctx, m.pressure.level(), n)
}

// Storm is the one storm meta-alarm.
type Storm struct {
	ID          int64      `json:"id"`
	State       string     `json:"state"`
	StartedAt   time.Time  `json:"started_at"`
	EndedAt     *time.Time `json:"ended_at,omitempty"`
	PeakBacklog int64      `json:"peak_backlog"`
}

type stormState struct {
	mu  sync.Mutex
	cur *Storm
}

func (s *stormState) active() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.cur != nil }
func (s *stormState) current() *Storm {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil
	}
	c := *s.cur
	return &c
}
func (s *stormState) set(c *Storm) { s.mu.Lock(); s.cur = c; s.mu.Unlock() }

// stormStep opens the storm meta-alarm at level 3 (one at a time: the
// database's unique index), raises its peak, and closes it at level 0.
func (m *Module[TTx]) stormStep(ctx context.Context, lvl int, backlog int64) error {
	var st Storm
	err := m.DB.QueryRow(ctx, m.q.Get("StormActive")).Scan(&st.ID, &st.StartedAt, &st.PeakBacklog)
	switch {
	case err == nil:
		st.State = "active"
		if backlog > st.PeakBacklog {
			if _, err := m.DB.Exec(ctx, m.q.Get("StormPeak"), st.ID, backlog); err != nil {
				return err
			}
			st.PeakBacklog = backlog
		}
		if lvl == 0 {
			now := m.Now()
			c, err := m.DB.Exec(ctx, m.q.Get("StormClose"), st.ID, now)
			if err != nil {
				return err
			}
			m.storm.set(nil)
			if c > 0 {
				m.counters.Add(StagePressure, "storm_over", 1)
				m.audit(ctx, "system:alarm", "storm_over", fmt.Sprintf("storm:%d", st.ID), fmt.Sprintf("峰值积压 %d", st.PeakBacklog))
				if m.set.ReplayAuto {
					m.Life.Go(func(ctx context.Context) {
						if _, err := m.Replay(ctx, st.ID, "system:alarm"); err != nil && ctx.Err() == nil {
							m.Log.Warn("alarm: storm replay", "err", err)
						}
					})
				}
			}
			return nil
		}
		m.storm.set(&st)
		return nil
	case !isNoRows(err):
		return err
	}
	if lvl < 3 {
		m.storm.set(nil)
		return nil
	}
	return m.retryTx(ctx, func(tx keelsql.Tx[TTx], fx *effects) error {
		now := m.Now()
		var id int64
		err := tx.QueryRow(ctx, m.q.Get("StormOpen"), now, backlog).Scan(&id)
		if isNoRows(err) {
			return nil // another instance opened it
		}
		if err != nil {
			return err
		}
		fx.count(StagePressure, "storm_open")
		m.storm.set(&Storm{ID: id, State: "active", StartedAt: now, PeakBacklog: backlog})
		if _, err := tx.Exec(ctx, m.q.Get("AuditInsert"), now, "system:alarm", "storm_open", fmt.Sprintf("storm:%d", id),
			fmt.Sprintf("普通积压 %d 条，超过风暴水位 %d", backlog, m.set.StormWater)); err != nil {
			return err
		}
		// The storm's own meta-alarm goes on the severe lane: one notice.
		_, err = m.newNotice(ctx, tx, fx, fmt.Sprintf("storm:%d:open", id), "", "storm", "storm", SevSevere, LaneSevere,
			NoticeBody{}, "", "", now, false, 0)
		return err
	})
}

// latencies keeps the last severe end-to-end latencies (sample receipt
// to the channel's confirmation) for the storm panel and the replay's
// observation windows.
type latencies struct {
	mu  sync.Mutex
	buf []time.Duration
	at  []time.Time
	i   int
}

func (l *latencies) observe(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) < 4096 {
		l.buf = append(l.buf, d)
		l.at = append(l.at, time.Now())
		return
	}
	l.buf[l.i], l.at[l.i] = d, time.Now()
	l.i = (l.i + 1) % len(l.buf)
}

func (l *latencies) quantilesSince(since time.Time) (time.Duration, time.Duration) {
	l.mu.Lock()
	var s []time.Duration
	for i, d := range l.buf {
		if !l.at[i].Before(since) {
			s = append(s, d)
		}
	}
	l.mu.Unlock()
	if len(s) == 0 {
		return 0, 0
	}
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
}

func (l *latencies) quantiles() (time.Duration, time.Duration) { return l.quantilesSince(time.Time{}) }

// ReplayStep is one audited step of a storm replay.
type ReplayStep struct {
	ID         int64     `json:"id"`
	Storm      int64     `json:"storm_id"`
	Step       int       `json:"step"`
	Rate       int       `json:"rate_per_second"`
	Planned    int       `json:"planned"`
	Sent       int       `json:"sent"`
	Merged     int       `json:"merged"`
	SevereP99  int64     `json:"severe_p99_ms"`
	Verdict    string    `json:"verdict"`
	Actor      string    `json:"actor"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
}

// ReplayResult sums a replay.
type ReplayResult struct {
	Storm     int64        `json:"storm_id"`
	Held      int          `json:"held"`
	Summaries int          `json:"summaries"`
	Steps     []ReplayStep `json:"steps"`
}

// Replay ends a storm's hold: the held ordinary notices are merged per
// instance into one summary each (first, peak, count, last, recovery;
// marked historical), then the summaries are released on a staircase of
// rates (alarm.replay rates, each step one observation window), climbing
// only while the severe lane's p99 stays within its bound, so realtime
// severe traffic keeps its share. Every step is audited.
func (m *Module[TTx]) Replay(ctx context.Context, stormID int64, actor string) (*ReplayResult, error) {
	if !m.replayMu.TryLock() {
		return nil, fmt.Errorf("a replay is already running")
	}
	defer m.replayMu.Unlock()
	res := &ReplayResult{Storm: stormID}
	// Merge: every held notice's members, per instance.
	held, err := m.noticesQ(ctx, m.DB, m.q.Get("NoticeHeld"), 100000)
	if err != nil {
		return nil, err
	}
	res.Held = len(held)
	seen := map[string]bool{}
	var ids []string
	for _, n := range held {
		var b NoticeBody
		if err := json.Unmarshal([]byte(n.Body), &b); err != nil {
			return nil, fmt.Errorf("notice %d body: %w", n.ID, err)
		}
		for _, f := range b.Members {
			if !seen[f.Instance] {
				seen[f.Instance] = true
				ids = append(ids, f.Instance)
			}
		}
	}
	sort.Strings(ids)
	var summaries []int64
	// Summaries are written held, then each held notice marked merged, in
	// one transaction per chunk: a crash leaves either both or neither.
	chunks := [][]string{}
	for start := 0; start < len(ids); start += 500 {
		chunks = append(chunks, ids[start:min(start+500, len(ids))])
	}
	if len(chunks) == 0 && len(held) > 0 {
		chunks = append(chunks, nil)
	}
	for ci, part := range chunks {
		last := ci == len(chunks)-1
		var made []int64
		err := m.retryTx(ctx, func(tx keelsql.Tx[TTx], fx *effects) error {
			made = made[:0]
			for _, id := range part {
				inst, err := m.instanceTx(ctx, tx, id)
				if err != nil {
					return err
				}
				var nid int64
				b := NoticeBody{Members: []NoticeFacts{factsOf(inst)}, Historical: true}
				b.Key, b.Kind, b.Level, b.Lane, b.At = fmt.Sprintf("summary:%s:%d", id, stormID), "summary", inst.PeakSeverity, LaneReplay, m.Now()
				body, _ := json.Marshal(b)
				err = tx.QueryRow(ctx, m.q.Get("NoticeInsert"), b.Key, id, inst.Rule, "summary", inst.PeakSeverity, LaneReplay, "webhook", "held", "",
					1, string(body), m.Now(), inst.ReceivedAt, stormID).Scan(&nid)
				if isNoRows(err) {
					continue
				}
				if err != nil {
					return err
				}
				made = append(made, nid)
			}
			if last {
				for _, n := range held {
					if _, err := tx.Exec(ctx, m.q.Get("NoticeMerge"), n.ID, stormID); err != nil {
						return err
					}
					fx.count(StageNotice, "merged")
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		summaries = append(summaries, made...)
	}
	res.Summaries = len(summaries)
	m.audit(ctx, actor, "replay_merge", fmt.Sprintf("storm:%d", stormID), fmt.Sprintf("%d 条待发通知合并为 %d 条摘要", len(held), len(summaries)))
	// Staircase.
	step, next := 0, 0
	for next < len(summaries) {
		rate := m.set.ReplayRates[min(step, len(m.set.ReplayRates)-1)]
		planned := rate * max(1, int(m.set.ReplayWindow/time.Second))
		chunk := summaries[next:min(next+planned, len(summaries))]
		started := time.Now()
		startedAt := m.Now()
		sent, err := m.releaseAt(ctx, chunk, rate, stormID)
		if err != nil {
			return res, err
		}
		next += sent
		// Observation window: the rest of it, then the severe p99 decides.
		if rest := m.set.ReplayWindow - time.Since(started); rest > 0 {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(rest):
			}
		}
		_, p99 := m.latency.quantilesSince(started)
		verdict := "climb"
		if p99 > m.set.SevereBound {
			verdict = "hold" // severe latency over its bound: stay on this step
		} else if step < len(m.set.ReplayRates)-1 {
			step++
		} else {
			verdict = "top"
		}
		rs := ReplayStep{Storm: stormID, Step: len(res.Steps) + 1, Rate: rate, Planned: len(chunk), Sent: sent, Merged: len(held),
			SevereP99: p99.Milliseconds(), Verdict: verdict, Actor: actor, StartedAt: startedAt, FinishedAt: m.Now()}
		if len(res.Steps) > 0 {
			rs.Merged = 0
		}
		if _, err := m.DB.Exec(ctx, m.q.Get("ReplayInsert"), rs.Storm, rs.Step, rs.Rate, rs.Planned, rs.Sent, rs.Merged, rs.SevereP99,
			rs.Verdict, rs.Actor, rs.StartedAt, rs.FinishedAt); err != nil {
			return res, err
		}
		res.Steps = append(res.Steps, rs)
	}
	return res, nil
}

// releaseAt makes held summaries pending at rate per second.
func (m *Module[TTx]) releaseAt(ctx context.Context, ids []int64, rate int, stormID int64) (int, error) {
	tick := time.Second / time.Duration(max(1, min(rate, 50)))
	per := max(1, rate/int(time.Second/tick))
	sent := 0
	t := time.NewTicker(tick)
	defer t.Stop()
	for sent < len(ids) {
		part := ids[sent:min(sent+per, len(ids))]
		err := m.retryTx(ctx, func(tx keelsql.Tx[TTx], fx *effects) error {
			for _, id := range part {
				c, err := tx.Exec(ctx, m.q.Get("NoticeRelease"), id, stormID)
				if err != nil {
					return err
				}
				if c > 0 {
					fx.count(StageNotice, "replayed")
					if err := m.enqueue(ctx, tx, fx, id, LaneReplay); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return sent, err
		}
		sent += len(part)
		if sent < len(ids) {
			select {
			case <-ctx.Done():
				return sent, ctx.Err()
			case <-t.C:
			}
		}
	}
	return sent, nil
}

// Replays lists a storm's audited replay steps (0: all).
func (m *Module[TTx]) Replays(ctx context.Context, stormID int64) ([]ReplayStep, error) {
	rows, err := m.DB.Query(ctx, m.q.Get("ReplayList"), stormID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ReplayStep
	for rows.Next() {
		var r ReplayStep
		if err := rows.Scan(&r.ID, &r.Storm, &r.Step, &r.Rate, &r.Planned, &r.Sent, &r.Merged, &r.SevereP99, &r.Verdict, &r.Actor,
			&r.StartedAt, &r.FinishedAt); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (m *Module[TTx]) audit(ctx context.Context, actor, action, subject, detail string) {
	if _, err := m.DB.Exec(ctx, m.q.Get("AuditInsert"), m.Now(), actor, action, subject, detail); err != nil {
		m.Log.Warn("alarm: audit", "err", err)
	}
}
