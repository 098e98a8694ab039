package delivery

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
)

// presence knows which instance holds a live connection of which
// application: its own from links, the others' from the presence table,
// read on every heartbeat. An instance whose heartbeat stopped (it died)
// drops out after liveFor.
type presence struct {
	mu        sync.RWMutex
	self      string
	live      map[int64][]string // application → instances holding it, sorted
	instances []string           // instances alive, sorted
}

// liveBeats is how many heartbeat intervals a presence row stays live.
const liveBeats = 3

func (p *presence) set(rows []presenceRow) {
	live := map[int64][]string{}
	var inst []string
	for _, r := range rows {
		if r.AppID == 0 {
			inst = append(inst, r.Instance)
		} else {
			live[r.AppID] = append(live[r.AppID], r.Instance)
		}
	}
	p.mu.Lock()
	p.live, p.instances = live, inst
	p.mu.Unlock()
}

// owner picks the one instance that sends for an application: among the
// instances holding a connection of it (held includes this one when it
// holds one), or among every live instance when none does (HTTP
// applications, or CMPP ones offline, whose jobs are then parked by one
// instance). One sender per application makes the write pacing, and so
// the rate the customer sees, hold across instances.
func (p *presence) owner(appID int64, cmppApp, heldHere bool) string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var cands []string
	if cmppApp {
		cands = append(cands, p.live[appID]...)
		if heldHere && !slices.Contains(cands, p.self) {
			cands = append(cands, p.self)
		}
	}
	if len(cands) == 0 {
		cands = append(cands, p.instances...)
		if !slices.Contains(cands, p.self) {
			cands = append(cands, p.self)
		}
	}
	slices.Sort(cands)
	return cands[int(appID%int64(len(cands)))]
}

// heldElsewhere reports whether another instance holds a live connection.
func (p *presence) heldElsewhere(appID int64) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, in := range p.live[appID] {
		if in != p.self {
			return true
		}
	}
	return false
}

// beatLoop runs the heartbeat: record what this instance holds, read what
// every instance holds, refresh the application cache and the active
// tasks, and recompute the claimable flow keys; every heartbeat and when
// kicked. Start has just beaten, so the loop waits first: a second beat
// at once only repeated the first one's statements, and refreshed the
// applications at a moment no caller chose (a test creating an
// application on another instance saw this one pick it up at random).
func (m *Module[TTx]) beatLoop(ctx context.Context) {
	t := time.NewTicker(m.set.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-m.beatNow:
		case <-ctx.Done():
			return
		}
		m.beat(ctx)
	}
}

func (m *Module[TTx]) beat(ctx context.Context) {
	if err := m.st.beat(ctx, m.instance, m.links.held()); err != nil && ctx.Err() == nil {
		m.log.Warn("delivery: presence heartbeat", "err", err)
	}
	if rows, err := m.st.livePresence(ctx, time.Now().Add(-liveBeats*m.set.Heartbeat)); err == nil {
		m.pres.set(rows)
	}
	if err := m.refreshApps(ctx); err != nil && ctx.Err() == nil {
		m.log.Warn("delivery: refreshing applications", "err", err)
	}
	m.refreshTasks(ctx)
	m.recomputeKeys()
}

// refreshTasks reads the requeue tasks whose items may still be claimed:
// every queued, running or paused task, and recently terminated ones with
// items still live (written before the termination, finishing on their
// ACK).
func (m *Module[TTx]) refreshTasks(ctx context.Context) {
	c := m.client.Load()
	if c == nil {
		return
	}
	var ids []int64
	var before int64
	for {
		page, err := c.BatchList(ctx, &keel.BatchListParams{Kind: BatchKind, BeforeID: before, Limit: 200,
			States: []keeltype.BatchState{keeltype.BatchQueued, keeltype.BatchRunning, keeltype.BatchPaused}})
		if err != nil {
			return
		}
		for _, b := range page {
			ids = append(ids, b.ID)
		}
		if len(page) < 200 {
			break
		}
		before = page[len(page)-1].ID
	}
	ended, err := c.BatchList(ctx, &keel.BatchListParams{Kind: BatchKind, Limit: recentTerminated,
		States: []keeltype.BatchState{keeltype.BatchTerminated}})
	if err != nil {
		return
	}
	for _, b := range ended {
		if liveItems(b) > 0 {
			ids = append(ids, b.ID)
		}
	}
	m.mu.Lock()
	m.tasks = ids
	m.mu.Unlock()
}

// recentTerminated bounds how many terminated tasks the heartbeat looks at
// for items still finishing.
const recentTerminated = 100

func liveItems(b *keeltype.BatchRow) int64 {
	var n int64
	for o, v := range b.Counts {
		if o.Live() {
			n += v
		}
	}
	return n
}

// noteTask adds a task created here to the active ones at once.
func (m *Module[TTx]) noteTask(id int64) {
	m.mu.Lock()
	if !slices.Contains(m.tasks, id) {
		m.tasks = append(m.tasks, id)
	}
	m.mu.Unlock()
	m.recomputeKeys()
}

// recomputeKeys is the set of flow keys this instance claims (a push is
// claimed only where its customer is connected): the applications
// it sends for (presence.owner) — a CMPP application connected here, an
// HTTP application, or a CMPP application connected nowhere (its jobs are
// claimed to be parked waiting for the connection rather than left
// queued) — each as "app:<id>" and as the key of every active task.
func (m *Module[TTx]) recomputeKeys() {
	var base []string
	for _, a := range m.apps.all() {
		cmppApp := a.Protocol.CMPP()
		here := cmppApp && m.links.has(a.ID)
		if cmppApp && !here && m.pres.heldElsewhere(a.ID) {
			continue
		}
		if here && !m.set.OneSender || m.pres.owner(a.ID, cmppApp, here) == m.instance {
			base = append(base, a.FlowKey())
		}
	}
	m.mu.Lock()
	tasks := append([]int64(nil), m.tasks...)
	m.mu.Unlock()
	keys := make([]string, 0, len(base)*(1+len(tasks)))
	keys = append(keys, base...)
	for _, id := range tasks {
		p := keel.BatchKeyPrefix(id)
		for _, k := range base {
			keys = append(keys, p+k)
		}
	}
	slices.Sort(keys)
	old := m.keys.Swap(&keys)
	if c := m.client.Load(); c != nil && (old == nil || grew(*old, keys)) {
		c.WakeQueue(QueueName)
	}
}

func grew(old, cur []string) bool {
	for _, k := range cur {
		if _, ok := slices.BinarySearch(old, k); !ok {
			return true
		}
	}
	return false
}

// heldKeys is keel.QueueConfig.FlowKeys of the delivery queue.
func (m *Module[TTx]) heldKeys() []string {
	if k := m.keys.Load(); k != nil {
		return *k
	}
	return nil
}

// wakeConnected makes the jobs waiting for app's connection available:
// its own pushes and every active task's items. It runs at connect and
// again shortly after, for a job that parked just as the customer came.
func (m *Module[TTx]) wakeConnected(ctx context.Context, appID int64) {
	c := m.client.Load()
	if c == nil {
		return
	}
	key := appKey(appID)
	m.mu.Lock()
	tasks := append([]int64(nil), m.tasks...)
	m.mu.Unlock()
	keys := []string{key}
	for _, id := range tasks {
		keys = append(keys, keel.BatchKeyPrefix(id)+key)
	}
	for _, k := range keys {
		if _, err := c.JobWake(ctx, &keel.JobWakeParams{FlowKey: k, WaitReason: keel.WaitConnection}); err != nil && ctx.Err() == nil {
			m.log.Warn("delivery: waking jobs waiting for a connection", "key", k, "err", err)
		}
	}
}
