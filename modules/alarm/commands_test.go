package alarm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/keelwork/keel/module/moduletest"
)

// TestAlarmCommands runs the `keel alarm` verbs through cobra against the
// module's API: a severe instance listed and acknowledged, a silence, the
// storm panel, --json; bad input is refused before anything is sent.
func TestAlarmCommands(t *testing.T) {
	moduletest.Each(t, Lines, testCommands, testCommands)
}

func testCommands[TTx any](t *testing.T, e *moduletest.Env[TTx]) {
	ctx := context.Background()
	r := start(t, e, nil)
	r.devices("d1")
	r.mustSend("d1", "temp", 130, 1, 1) // severe: an instance at once
	l := r.instances("d1")
	if len(l) != 1 {
		t.Fatalf("instances of d1: %d", len(l))
	}
	id := l[0].ID
	caller := &moduletest.HTTPCaller{Base: moduletest.ServeAPI(t, r.m.Routes(), "ops").URL}
	cli := &moduletest.CLI{API: caller, Verbs: commands}
	run := func(args ...string) (string, error) { return cli.Run(ctx, args...) }
	out, err := run("alarm", "instances")
	if err != nil || !strings.Contains(out, "INSTANCE") || !strings.Contains(out, id) || !strings.Contains(out, "firing") {
		t.Fatalf("instances: %v\n%s", err, out)
	}
	if out, err = run("alarm", "instances", "--state", "firing", "--device", "d1", "--json"); err != nil || !json.Valid([]byte(out)) || !strings.Contains(out, id) {
		t.Fatalf("instances --json: %v\n%s", err, out)
	}
	if out, err = run("alarm", "ack", id, "--comment", "on my way"); err != nil || !strings.Contains(out, id+" is acknowledged (by ops)") {
		t.Fatalf("ack: %v\n%s", err, out)
	}
	if i, _ := r.m.InstanceByID(ctx, id); i == nil || i.State != StAcked || i.AckedBy != "ops" || i.AckComment != "on my way" {
		t.Fatalf("after ack: %+v", i)
	}
	if out, err = run("alarm", "ack", id); err != nil || !strings.Contains(out, "acknowledged") {
		t.Fatalf("ack again (the same outcome): %v\n%s", err, out)
	}
	if _, err = run("alarm", "ack", "AL000000nothere"); err == nil || !strings.Contains(err.Error(), "no alarm instance AL000000nothere") {
		t.Fatalf("ack of an unknown instance: %v", err)
	}
	if out, err = run("alarm", "silence", "--device", "d1", "--comment", "boiler maintenance", "--for", "2h"); err != nil || !strings.Contains(out, "silence ") {
		t.Fatalf("silence: %v\n%s", err, out)
	}
	if s, _ := r.m.Silences(ctx, 10); len(s) != 1 || s[0].Device != "d1" || s[0].CreatedBy != "ops" {
		t.Fatalf("silences after the verb: %+v", s)
	}
	if out, err = run("alarm", "storm"); err != nil || !strings.Contains(out, "ordinary backlog") || !strings.Contains(out, "STORM") {
		t.Fatalf("storm: %v\n%s", err, out)
	}
	sent := caller.Sent()
	for _, args := range [][]string{
		{"alarm", "instances", "--state", "burning"},
		{"alarm", "instances", "extra"},
		{"alarm", "ack", "not an id!"},
		{"alarm", "ack"},
		{"alarm", "silence", "--comment", "no target"},
		{"alarm", "silence", "--device", "d1", "--comment", "no"},
		{"alarm", "silence", "--device", "d1", "--comment", "too long", "--for", "800h"},
		{"alarm", "replay", "abc"},
		{"alarm", "replay", "0"},
		{"alarm", "nonsense"},
	} {
		if _, err := run(args...); err == nil {
			t.Errorf("%s: no error", strings.Join(args, " "))
		}
	}
	if caller.Sent() != sent {
		t.Fatalf("bad input sent %d requests", caller.Sent()-sent)
	}
}
