package alarm

import (
	"context"
	"testing"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module/moduletest"
)

// TestAlarmDevFleet: `keel dev` embeds a broker and runs a small fleet;
// its readings arrive over MQTT through the shared subscription and are
// persisted.
func TestAlarmDevFleet(t *testing.T) {
	moduletest.Each(t, Lines, testDevFleet, testDevFleet)
}

func testDevFleet[TTx any](t *testing.T, e *moduletest.Env[TTx]) {
	h := e.Host(map[string]string{"alarm.embedded_addr": "127.0.0.1:0", "alarm.demo_devices": "10", "alarm.demo_interval": "300ms"})
	h.Demo = true
	m, err := New(h)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &keel.Config{}
	if err := m.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	c := e.Client(t, cfg)
	if err := m.Start(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Stop(ctx)
	})
	r := &rig[TTx]{t: t, e: e, m: m}
	moduletest.WaitFor(t, 90*time.Second, "the fleet's readings persisted", func() bool {
		return r.count("SELECT count(DISTINCT device) FROM alarm_telemetry") == 10
	})
}
