package alarm

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/keelwork/keel/module/moduletest"
)

// TestAlarmInstanceLifecycle: the same fault 100 times, its recovery and a
// new trigger make exactly two instances; a device reboot (new boot epoch)
// is new data, not late; an out-of-order replay of everything (and a late
// sample never seen before) changes nothing.
func TestAlarmInstanceLifecycle(t *testing.T) {
	moduletest.Each(t, Lines, testLifecycle, testLifecycle)
}

func testLifecycle[TTx any](t *testing.T, e *moduletest.Env[TTx]) {
	r := start(t, e, nil)
	r.devices("d1")
	type sent struct {
		v         float64
		boot, seq int64
	}
	var all []sent
	send := func(v float64, boot, seq int64) {
		r.mustSend("d1", "temp", v, boot, seq)
		all = append(all, sent{v, boot, seq})
	}
	// 100 faults (seq 1..101 without 60, held back as a late sample).
	for seq := int64(1); seq <= 101; seq++ {
		if seq != 60 {
			send(90, 1, seq)
		}
	}
	r.settle()
	l := r.instances("d1")
	if len(l) != 1 || l[0].State != StFiring || l[0].Count != 98 || l[0].FirstSeq != 3 || l[0].RuleVersion != 1 {
		t.Fatalf("after 100 faults (hold 3): %+v", l)
	}
	first := l[0].ID
	send(20, 1, 102) // one clear window: not yet recovered (recover 2)
	r.settle()
	if l := r.instances("d1"); l[0].State != StFiring {
		t.Fatalf("one clear sample recovered it: %+v", l[0])
	}
	send(20, 1, 103)
	r.settle()
	l = r.instances("d1")
	if len(l) != 1 || l[0].State != StRecovered || l[0].RecoveredAt == nil {
		t.Fatalf("after recovery: %+v", l)
	}
	// The device rebooted: boot 2 starts at seq 1 again.
	for seq := int64(1); seq <= 3; seq++ {
		send(95, 2, seq)
	}
	r.settle()
	l = r.instances("d1")
	if len(l) != 2 {
		t.Fatalf("want two instances after a new trigger, got %d: %+v", len(l), l)
	}
	var second *Instance
	for _, i := range l {
		if i.ID != first {
			second = i
		}
	}
	if second == nil || second.State != StFiring || second.Boot != 2 || second.Count != 1 {
		t.Fatalf("the new instance: %+v", second)
	}
	snapshot := func() string {
		var s []string
		for _, i := range r.instances("d1") {
			s = append(s, fmt.Sprintf("%s %s c%d last%d v%d", i.ID, i.State, i.Count, i.LastSeq, i.Ver))
		}
		sort.Strings(s)
		h1, _ := r.m.History(context.Background(), first)
		h2, _ := r.m.History(context.Background(), second.ID)
		return fmt.Sprint(s, len(h1), len(h2))
	}
	before := snapshot()
	// Late: seq 60 of boot 1 (never seen; a clear reading) — kept as
	// evidence, flagged late, no instance change.
	r.mustSend("d1", "temp", 20, 1, 60)
	// Replay everything in reverse: all duplicates.
	for i := len(all) - 1; i >= 0; i-- {
		r.mustSend("d1", "temp", all[i].v, all[i].boot, all[i].seq)
	}
	r.settle()
	if after := snapshot(); after != before {
		t.Fatalf("the replay changed instances:\nbefore %s\nafter  %s", before, after)
	}
	if n := r.count("SELECT count(*) FROM alarm_telemetry WHERE late = true AND seq = 60"); n != 1 {
		t.Fatalf("the late sample is not kept as late evidence (%d)", n)
	}
	if n := r.count("SELECT count(*) FROM alarm_telemetry WHERE device = 'd1'"); n != int64(len(all)+1) {
		t.Fatalf("telemetry rows %d, want %d (duplicates absorbed)", n, len(all)+1)
	}
	// A flap in 待确认 returns to 正常 without an instance or notice.
	r.devices("d2")
	r.mustSend("d2", "temp", 90, 1, 1)
	r.mustSend("d2", "temp", 90, 1, 2)
	r.mustSend("d2", "temp", 20, 1, 3)
	r.settle()
	if l := r.instances("d2"); len(l) != 0 {
		t.Fatalf("a flap opened an instance: %+v", l)
	}
	if n := r.count("SELECT count(*) FROM alarm_track WHERE device = 'd2' AND state = 'normal'"); n != 1 {
		t.Fatalf("the flap did not return to normal")
	}
}

// TestAlarmConcurrentTriggerOneInstance: twenty severe readings of one
// device evaluated at once make one instance counting all twenty; the
// database refuses a second open instance outright.
func TestAlarmConcurrentTriggerOneInstance(t *testing.T) {
	moduletest.Each(t, Lines, testConcurrent, testConcurrent)
}

func testConcurrent[TTx any](t *testing.T, e *moduletest.Env[TTx]) {
	r := start(t, e, nil)
	r.devices("d1")
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for seq := int64(1); seq <= 20; seq++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- r.send("d1", "temp", 130, 1, seq)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	r.settle()
	l := r.instances("d1")
	// Readings evaluated after a higher sequence are late (kept as
	// evidence, not counted): together they are the twenty.
	late := r.count("SELECT count(*) FROM alarm_telemetry WHERE late = true")
	if len(l) != 1 || l[0].Count+late != 20 || l[0].Severity != SevSevere {
		t.Fatalf("want one severe instance counting 20 with the late ones (%d late): %+v", late, l[0])
	}
	moduletest.WaitFor(t, 30*time.Second, "one firing notice", func() bool {
		return r.hook.count(l[0].ID+":firing:3") == 1
	})
	if n := r.count("SELECT count(*) FROM alarm_notice WHERE instance_id = $1", l[0].ID); n != 1 {
		t.Fatalf("notices of the instance: %d", n)
	}
	q := "INSERT INTO alarm_instance (id, device, rule, rule_version, state, severity, peak_severity, peak_value, first_value, last_value, count, first_at, last_at, boot, first_seq, last_seq, received_at, ver) VALUES ('X2', 'd1', 'temp-high', 1, 'firing', 3, 3, 1, 1, 1, 1, $1, $1, 1, 1, 1, $1, 1)"
	if _, err := e.DB.Exec(context.Background(), e.SQL(q), e.Clock.Now()); err == nil {
		t.Fatal("the database accepted a second open instance of the same device and rule")
	}
}
