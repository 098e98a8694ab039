package alarm

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelwork/keel/module/moduletest"
)

// severeBound is the p99 this test holds severe alarms to, from the
// reading's submission to the webhook receiver's receipt, while an
// ordinary flood outruns evaluation: 5 s on PostgreSQL on a loaded
// two-core machine under -race (the benchmark measures the production
// figure); 30 s on SQLite, whose one writer the engine, both lanes and the
// flood share (pure-Go SQLite under -race on a loaded machine runs
// statements in tens of milliseconds).
func severeBound(dialect string) time.Duration {
	if dialect == "sqlite" {
		return 30 * time.Second
	}
	return 5 * time.Second
}

// TestAlarmSevereBypassUnderStorm floods ordinary telemetry beyond what
// evaluation keeps up with (the backlog grows) and sends severe readings
// meanwhile: every severe alarm reaches its firing notice, and its
// recovery notice, within severeBound at p99; none is shed.
func TestAlarmSevereBypassUnderStorm(t *testing.T) {
	moduletest.Each(t, Lines, testSevereBypass, testSevereBypass)
}

func testSevereBypass[TTx any](t *testing.T, e *moduletest.Env[TTx]) {
	// SQLite's one writer is shared by everything: a smaller flood
	// against a smaller capacity, still beyond it.
	floodDevices, evalRate, every := 40, "100", 40*time.Millisecond
	if e.Name == "sqlite" {
		floodDevices, evalRate, every = 5, "10", 100*time.Millisecond
	}
	severe := 12
	if e.Name == "sqlite" {
		severe = 4
	}
	r := start(t, e, map[string]string{"alarm.eval_batch": "20", "alarm.eval_rate": evalRate})
	var ids []string
	for i := 0; i < floodDevices; i++ {
		ids = append(ids, fmt.Sprintf("f%02d", i))
	}
	for i := 0; i < severe; i++ {
		ids = append(ids, fmt.Sprintf("s%02d", i))
	}
	r.devices(ids...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var flooded atomic.Int64
	var maxBacklog atomic.Int64
	// observe keeps the largest backlog seen by any flooder or by the wait
	// below; a compare-and-swap loop, since a plain load-then-store lets a
	// smaller sample overwrite a larger one, and the wait's own sample must
	// count: it is the one that decided the flood had outrun evaluation.
	observe := func(b int64) {
		for {
			cur := maxBacklog.Load()
			if b <= cur || maxBacklog.CompareAndSwap(cur, b) {
				return
			}
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < floodDevices; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dev := fmt.Sprintf("f%02d", i)
			// 1,000 readings/s (PostgreSQL: 40 devices at 25/s) or 50/s
			// (SQLite: 5 at 10/s) against an evaluation capacity of
			// 100/s or 10/s.
			tick := time.NewTicker(every)
			defer tick.Stop()
			for seq := int64(1); ctx.Err() == nil; seq++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				s := Sample{Gateway: "gw1", Device: dev, Metric: "temp", Value: 85 + float64(seq%10), Boot: 1, Seq: seq, DeviceAt: e.Clock.Now()}
				r.m.Submit(ctx, Topic("gw1", dev), Encode(s), func(error) {})
				flooded.Add(1)
				observe(r.m.Pressure().Backlog)
			}
		}()
	}
	moduletest.WaitFor(t, 90*time.Second, "an ordinary backlog", func() bool {
		b := r.m.Pressure().Backlog
		observe(b)
		return b > 200
	})
	sentAt := map[string]time.Time{}
	for i := 0; i < severe; i++ {
		dev := fmt.Sprintf("s%02d", i)
		sentAt[dev] = time.Now()
		r.mustSend(dev, "temp", 130, 1, 1)
	}
	moduletest.WaitFor(t, 3*time.Minute, "every severe firing notice", func() bool { return len(r.hook.received("firing")) == severe })
	// Short-lived: each recovers at once and still gets its recovered notice.
	recoverAt := map[string]time.Time{}
	for i := 0; i < severe; i++ {
		dev := fmt.Sprintf("s%02d", i)
		recoverAt[dev] = time.Now()
		r.mustSend(dev, "temp", 20, 1, 2)
		r.mustSend(dev, "temp", 20, 1, 3)
	}
	moduletest.WaitFor(t, 3*time.Minute, "every severe recovered notice", func() bool { return len(r.hook.received("recovered")) == severe })
	cancel()
	wg.Wait()
	var lat []time.Duration
	r.hook.mu.Lock()
	for _, b := range r.hook.bodies {
		if b.Lane != LaneSevere {
			continue
		}
		dev := b.Members[0].Device
		from := sentAt[dev]
		if b.Kind == "recovered" {
			from = recoverAt[dev]
		}
		lat = append(lat, r.hook.at[b.Key].Sub(from))
	}
	r.hook.mu.Unlock()
	slices.Sort(lat)
	p99 := lat[min(len(lat)-1, len(lat)*99/100)]
	t.Logf("%s: %d ordinary readings flooded, backlog up to %d; severe notices %d, p50 %v p99 %v (bound %v)",
		e.Name, flooded.Load(), maxBacklog.Load(), len(lat), lat[len(lat)/2], p99, severeBound(e.Name))
	if p99 > severeBound(e.Name) {
		t.Fatalf("severe p99 %v over the bound %v", p99, severeBound(e.Name))
	}
	if maxBacklog.Load() <= 200 {
		t.Fatalf("the flood never outran evaluation (backlog %d)", maxBacklog.Load())
	}
	if d := r.hook.duplicates(); d != 0 {
		t.Fatalf("%d duplicate deliveries", d)
	}
	rec, err := r.m.ReconcileSevere(context.Background(), e.Clock.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Compared != severe || rec.Delivered != severe || len(rec.Undelivered) != 0 {
		t.Fatalf("reconciliation: %+v", rec)
	}
}

// TestAlarmAggregationKeepsFacts: ordinary alarms of one rule within the
// window make one notice per group flush, each member with its first,
// peak, count, last and recovery; a change after the flush waits for the
// group interval.
func TestAlarmAggregationKeepsFacts(t *testing.T) {
	moduletest.Each(t, Lines, testAggregation, testAggregation)
}

func testAggregation[TTx any](t *testing.T, e *moduletest.Env[TTx]) {
	r := start(t, e, map[string]string{"alarm.group_wait": "30s", "alarm.group_interval": "60s"})
	r.devices("a1", "a2", "a3", "a4")
	peaks := map[string]float64{"a1": 99, "a2": 91, "a3": 105, "a4": 88}
	for dev, peak := range peaks {
		for seq := int64(1); seq <= 6; seq++ {
			v := 85.0
			if seq == 4 {
				v = peak
			}
			r.mustSend(dev, "temp", v, 1, seq)
		}
	}
	// a4 recovers within the window.
	r.mustSend("a4", "temp", 20, 1, 7)
	r.mustSend("a4", "temp", 20, 1, 8)
	r.settle()
	if n, err := r.m.FlushGroups(context.Background()); err != nil || n != 0 {
		t.Fatalf("flushed before group_wait: %d %v", n, err)
	}
	e.Clock.Add(31 * time.Second)
	if n, err := r.m.FlushGroups(context.Background()); err != nil || n != 1 {
		t.Fatalf("flush after group_wait: %d %v", n, err)
	}
	moduletest.WaitFor(t, 30*time.Second, "the group notice", func() bool { return len(r.hook.received("group")) == 1 })
	g := r.hook.received("group")[0]
	if len(g.Members) != 4 || g.Group != "temp-high" {
		t.Fatalf("group notice: %+v", g)
	}
	for _, f := range g.Members {
		// hold 3: opened at seq 3, so seq 3..6 count 4.
		if f.PeakValue != peaks[f.Device] || f.Count != 4 || f.FirstAt.IsZero() || f.LastAt.Before(f.FirstAt) || f.RuleVersion != 1 {
			t.Fatalf("member %s lost facts: %+v", f.Device, f)
		}
		if (f.Device == "a4") != (f.RecoveredAt != nil && f.State == StRecovered) {
			t.Fatalf("member %s recovery: %+v", f.Device, f)
		}
	}
	// A change after the flush: due one group interval after it.
	r.mustSend("a1", "temp", 20, 1, 7)
	r.mustSend("a1", "temp", 20, 1, 8)
	r.settle()
	e.Clock.Add(31 * time.Second)
	if n, _ := r.m.FlushGroups(context.Background()); n != 0 {
		t.Fatal("flushed again before the group interval")
	}
	e.Clock.Add(30 * time.Second)
	if n, _ := r.m.FlushGroups(context.Background()); n != 1 {
		t.Fatal("no flush after the group interval")
	}
	moduletest.WaitFor(t, 30*time.Second, "the second group notice", func() bool { return len(r.hook.received("group")) == 2 })
	g2 := r.hook.received("group")[1]
	if len(g2.Members) != 1 || g2.Members[0].Device != "a1" || g2.Members[0].State != StRecovered || g2.Members[0].Count != 4 {
		t.Fatalf("second flush: %+v", g2)
	}
	panel := r.m.StormPanel(context.Background())
	if panel.Counters[StageNotice+"/aggregated_members"] != 5 || panel.Compression != 2.5 {
		t.Fatalf("aggregation counters: %v ratio %v", panel.Counters, panel.Compression)
	}
}

// TestAlarmBackpressureNeverShedsSevere: at the top backpressure level
// debug telemetry is paused and idle clear readings sampled (both
// counted), while a first trigger, a severe reading, an escalation and a
// recovery all pass; the storm meta-alarm opens once.
func TestAlarmBackpressureNeverShedsSevere(t *testing.T) {
	moduletest.Each(t, Lines, testBackpressure, testBackpressure)
}

func testBackpressure[TTx any](t *testing.T, e *moduletest.Env[TTx]) {
	r := start(t, e, map[string]string{"alarm.sample_every": "10"})
	r.devices("idle", "hot", "sev")
	r.m.ForcePressure(3)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if err := r.m.measure(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Debug telemetry: paused.
	dbg := Sample{Gateway: "gw1", Device: "idle", Metric: "temp", Value: 30, Boot: 1, Seq: 1000, DeviceAt: e.Clock.Now(), Debug: true}
	if err := r.m.Ingest(ctx, Topic("gw1", "idle"), Encode(dbg)); err != nil {
		t.Fatal(err)
	}
	// Idle clear readings: 1 in 10 kept.
	for seq := int64(1); seq <= 30; seq++ {
		r.mustSend("idle", "temp", 30, 1, seq)
	}
	// First trigger, repeats and an escalation to severe: never sampled.
	for seq := int64(1); seq <= 4; seq++ {
		r.mustSend("hot", "temp", 90, 1, seq)
	}
	r.settle() // the severe reading goes ahead on its lane: let seq 4 be evaluated first
	r.mustSend("hot", "temp", 125, 1, 5)
	// Severe at once, then its recovery (clear readings of an active device).
	r.mustSend("sev", "temp", 140, 1, 1)
	r.mustSend("sev", "temp", 20, 1, 2)
	r.mustSend("sev", "temp", 20, 1, 3)
	r.settle()
	c, err := r.m.CounterMap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c[StagePressure+"/paused_debug"] != 1 || c[StagePressure+"/sampled"] != 27 {
		t.Fatalf("shed counters: %v", c)
	}
	if n := r.count("SELECT count(*) FROM alarm_telemetry WHERE device = 'idle'"); n != 3 {
		t.Fatalf("idle readings kept: %d, want 3", n)
	}
	if n := r.count("SELECT count(*) FROM alarm_telemetry WHERE device IN ('hot', 'sev')"); n != 8 {
		t.Fatalf("critical readings kept: %d, want all 8", n)
	}
	hot := r.instances("hot")
	if len(hot) != 1 || hot[0].PeakSeverity != SevSevere || hot[0].Count != 3 {
		t.Fatalf("hot: %+v", *hot[0])
	}
	sev := r.instances("sev")
	if len(sev) != 1 || sev[0].State != StRecovered {
		t.Fatalf("sev: %+v", sev)
	}
	moduletest.WaitFor(t, 30*time.Second, "escalation, firing, recovery and storm notices", func() bool {
		return r.hook.count(hot[0].ID+":escalated:3") == 1 && r.hook.count(sev[0].ID+":firing:3") == 1 &&
			r.hook.count(sev[0].ID+":recovered:3") == 1 && len(r.hook.received("storm")) == 1
	})
	if n := r.count("SELECT count(*) FROM alarm_storm"); n != 1 {
		t.Fatalf("storm meta-alarms: %d", n)
	}
}

// TestAlarmStormReplayStaircase: ordinary notices held through a storm are
// merged per instance into summaries (first, peak, count, last, recovery;
// historical) and replayed on the staircase (scaled to 3, 5, 7/s with a
// one-second window), each step audited; each summary reaches the channel
// once, none of the merged notices does.
func TestAlarmStormReplayStaircase(t *testing.T) {
	moduletest.Each(t, Lines, testReplay, testReplay)
}

func testReplay[TTx any](t *testing.T, e *moduletest.Env[TTx]) {
	r := start(t, e, map[string]string{"alarm.group_wait": "1s", "alarm.group_interval": "1s", "alarm.replay_scale_percent": "1",
		"alarm.replay_window": "1s"})
	ctx := context.Background()
	const n = 24
	var ids []string
	for i := 0; i < n; i++ {
		ids = append(ids, fmt.Sprintf("r%02d", i))
	}
	r.devices(ids...)
	r.m.ForcePressure(3)
	if err := r.m.measure(ctx); err != nil {
		t.Fatal(err)
	}
	storm := r.m.Pressure().Storm
	if storm == nil {
		t.Fatal("no storm opened")
	}
	// The storm stays (level 3 also widens the windows 4x: 4 s).
	for _, dev := range ids {
		for seq := int64(1); seq <= 3; seq++ {
			r.mustSend(dev, "temp", 90, 1, seq)
		}
	}
	r.settle()
	e.Clock.Add(5 * time.Second)
	if _, err := r.m.FlushGroups(ctx); err != nil {
		t.Fatal(err)
	}
	// Half recover: a second held flush naming them again.
	for _, dev := range ids[:n/2] {
		r.mustSend(dev, "temp", 20, 1, 4)
		r.mustSend(dev, "temp", 20, 1, 5)
	}
	r.settle()
	e.Clock.Add(5 * time.Second)
	if _, err := r.m.FlushGroups(ctx); err != nil {
		t.Fatal(err)
	}
	if h := r.count("SELECT count(*) FROM alarm_notice WHERE state = 'held'"); h != 2 {
		t.Fatalf("held notices %d, want 2", h)
	}
	if len(r.hook.received("group")) != 0 {
		t.Fatal("a held notice reached the channel during the storm")
	}
	r.m.ForcePressure(0)
	if err := r.m.measure(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := r.m.Replay(ctx, storm.ID, "ops-wang")
	if err != nil {
		t.Fatal(err)
	}
	if res.Held != 2 || res.Summaries != n {
		t.Fatalf("merge: %+v", res)
	}
	var rates []int
	for _, s := range res.Steps {
		rates = append(rates, s.Rate)
	}
	if len(rates) < 3 || rates[0] != 3 || rates[1] != 5 || rates[2] != 7 {
		t.Fatalf("staircase rates %v", rates)
	}
	audited, err := r.m.Replays(ctx, storm.ID)
	if err != nil || len(audited) != len(res.Steps) || audited[0].Actor != "ops-wang" {
		t.Fatalf("audited steps %+v %v", audited, err)
	}
	moduletest.WaitFor(t, 60*time.Second, "every summary", func() bool { return len(r.hook.received("summary")) == n })
	recovered := 0
	for _, b := range r.hook.received("summary") {
		f := b.Members[0]
		if !b.Historical || f.Count != 1 || f.PeakValue != 90 {
			t.Fatalf("summary lost facts: %+v", b)
		}
		if f.RecoveredAt != nil {
			recovered++
		}
	}
	if recovered != n/2 || len(r.hook.received("group")) != 0 || r.hook.duplicates() != 0 {
		t.Fatalf("recovered %d, groups %d, duplicates %d", recovered, len(r.hook.received("group")), r.hook.duplicates())
	}
	if m := r.count("SELECT count(*) FROM alarm_notice WHERE state = 'merged'"); m != 2 {
		t.Fatalf("merged %d", m)
	}
}

// TestAlarmSilence: a silence mutes the notices of its device (a severe
// one too) while the instance still moves; after it is expired the
// recovery is notified; another device is not affected; a silence
// without creator, comment or end is refused.
func TestAlarmSilence(t *testing.T) {
	moduletest.Each(t, Lines, testSilence, testSilence)
}

func testSilence[TTx any](t *testing.T, e *moduletest.Env[TTx]) {
	r := start(t, e, nil)
	ctx := context.Background()
	r.devices("quiet", "loud")
	now := e.Clock.Now()
	for _, bad := range []Silence{{Device: "quiet", StartsAt: now, EndsAt: now.Add(time.Hour), Comment: "维护窗口"},
		{Device: "quiet", StartsAt: now, EndsAt: now.Add(time.Hour), CreatedBy: "ops"},
		{Device: "quiet", StartsAt: now, EndsAt: now, CreatedBy: "ops", Comment: "维护窗口"},
		{StartsAt: now, EndsAt: now.Add(time.Hour), CreatedBy: "ops", Comment: "维护窗口"}} {
		if _, err := r.m.AddSilence(ctx, bad); err == nil {
			t.Fatalf("accepted %+v", bad)
		}
	}
	id, err := r.m.AddSilence(ctx, Silence{Device: "quiet", StartsAt: now, EndsAt: now.Add(time.Hour), CreatedBy: "ops-li", Comment: "更换传感器"})
	if err != nil {
		t.Fatal(err)
	}
	r.mustSend("quiet", "temp", 130, 1, 1)
	r.mustSend("loud", "temp", 130, 1, 1)
	moduletest.WaitFor(t, 30*time.Second, "the loud device's notice", func() bool { return len(r.hook.received("firing")) == 1 })
	q := r.instances("quiet")
	if len(q) != 1 || q[0].State != StFiring {
		t.Fatalf("the silenced instance did not move: %+v", q)
	}
	if n := r.count("SELECT count(*) FROM alarm_notice WHERE instance_id = $1 AND state = 'muted'", q[0].ID); n != 1 {
		t.Fatalf("muted notices %d", n)
	}
	if got := r.hook.received("firing")[0].Members[0].Device; got != "loud" {
		t.Fatalf("delivered %s", got)
	}
	if err := r.m.ExpireSilence(ctx, id, "ops-li"); err != nil {
		t.Fatal(err)
	}
	r.mustSend("quiet", "temp", 20, 1, 2)
	r.mustSend("quiet", "temp", 20, 1, 3)
	moduletest.WaitFor(t, 30*time.Second, "the recovery after the silence", func() bool { return r.hook.count(q[0].ID+":recovered:3") == 1 })
	if r.hook.count(q[0].ID+":firing:3") != 0 {
		t.Fatal("the muted firing notice was sent")
	}
	// The reconciler reports the muted one apart, not as delivered.
	rec, err := r.m.ReconcileSevere(ctx, e.Clock.Now().Add(time.Hour))
	if err != nil || rec.Delivered != 1 || rec.Muted != 1 || len(rec.Undelivered) != 0 {
		t.Fatalf("reconciliation %+v %v", rec, err)
	}
}
