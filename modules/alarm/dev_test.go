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
// persisted. Its heat cycle gives the demo's board alarms to show, as an
// operator reads them from the API: the first device's temperature alarm
// fires and then recovers, and the third device's escalates to severe.
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

	api := moduletest.ServeAPI(t, m.Routes(), "viewer")
	instance := func(device string) map[string]any {
		a := moduletest.Do(t, api.URL, "GET", "/api/v1/alarm/instances?rule=temp-high&device="+device, nil, nil)
		list, _ := a.Body["instances"].([]any)
		if a.Status != 200 || len(list) == 0 {
			return nil
		}
		return list[0].(map[string]any)
	}
	_, first := FleetDevice(0)
	moduletest.WaitFor(t, 90*time.Second, "the first hot device's alarm to fire and recover", func() bool {
		i := instance(first)
		return i != nil && i["state"] == StRecovered && i["peak_severity"] == float64(SevMinor) && i["recovered_at"] != nil
	})
	_, third := FleetDevice(2)
	moduletest.WaitFor(t, 90*time.Second, "the third hot device's alarm to escalate to severe", func() bool {
		i := instance(third)
		return i != nil && i["peak_severity"] == float64(SevSevere) && i["peak_value"].(float64) >= 125
	})
	_, second := FleetDevice(1)
	if i := instance(second); i == nil || i["peak_severity"] != float64(SevMinor) {
		t.Fatalf("the second hot device's alarm: %v; want a minor one", i)
	}
	if _, last := FleetDevice(9); m.Fleet().rounds.Load() < 9*heatCycle {
		if i := instance(last); i != nil {
			t.Fatalf("a device the cycle has not reached has an alarm: %v", i)
		}
	}
}
