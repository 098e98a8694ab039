package alarm

import (
	"context"
	"testing"
	"time"

	"github.com/keelwork/keel/module/moduletest"
)

// FuzzParse: no input crashes the parser, every refusal is a stable
// quarantine reason, and an accepted message encodes back to itself.
func FuzzParse(f *testing.F) {
	f.Add("keel/alarm/v1/gw1/d1/telemetry", []byte(`{"metric":"temp","value":81.5,"boot":1,"seq":7,"ts":1767225600000}`))
	f.Add("keel/alarm/v1/gw1/d1/telemetry", []byte(`{"metric":"temp","value":1e400,"boot":1,"seq":7,"ts":1767225600000}`))
	f.Add("keel/alarm/v1/gw1/../telemetry", []byte(`{}`))
	f.Add("keel/alarm/v1/gw1/d1/telemetry", []byte(`{"metric":"temp","value":1,"boot":1,"seq":7,"ts":1767225600000}{}`))
	f.Add("other/topic", []byte("\xff\xfe"))
	f.Fuzz(func(t *testing.T, topic string, body []byte) {
		s, err := Parse(topic, body)
		if err != nil {
			switch ReasonOf(err) {
			case BadTopic, BadPayload, BadValue:
			default:
				t.Fatalf("refusal without a stable reason: %v", err)
			}
			return
		}
		again, err := Parse(Topic(s.Gateway, s.Device), Encode(s))
		if err != nil || again != s {
			t.Fatalf("round trip: %+v → %+v (%v)", s, again, err)
		}
	})
}

// TestAlarmBadInput: malformed topics and payloads, unknown devices and
// absurd values are counted and quarantined; nothing else changes.
func TestAlarmBadInput(t *testing.T) {
	moduletest.Each(t, Lines, testBadInput, testBadInput)
}

func testBadInput[TTx any](t *testing.T, e *moduletest.Env[TTx]) {
	r := start(t, e, nil)
	r.devices("d1")
	ctx := context.Background()
	ts := e.Clock.Now().UnixMilli()
	cases := []struct {
		topic, body, reason string
	}{
		{"keel/alarm/v1/gw1/d1/status", `{}`, BadTopic},
		{"keel/alarm/v1/gw1/d1/telemetry", `not json`, BadPayload},
		{"keel/alarm/v1/gw1/d1/telemetry", `{"metric":"temp","value":90,"boot":1,"seq":1}`, BadPayload},
		{"keel/alarm/v1/gw1/d1/telemetry", `{"metric":"temp","value":90,"boot":1,"seq":1,"ts":1,"x":1}`, BadPayload},
		{"keel/alarm/v1/gw1/ghost/telemetry", `{"metric":"temp","value":130,"boot":1,"seq":1,"ts":` + itoa(ts) + `}`, BadUnknownDevice},
		{"keel/alarm/v1/gw1/d1/telemetry", `{"metric":"temp","value":99999,"boot":1,"seq":1,"ts":` + itoa(ts) + `}`, BadValue},
	}
	for _, c := range cases {
		if err := r.m.Ingest(ctx, c.topic, []byte(c.body)); err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
	}
	got, err := r.m.CounterMap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for reason, want := range map[string]int64{BadTopic: 1, BadPayload: 3, BadUnknownDevice: 1, BadValue: 1} {
		if got[StageIngest+"/quarantined_"+reason] != want {
			t.Fatalf("quarantined %s: %d, want %d (%v)", reason, got[StageIngest+"/quarantined_"+reason], want, got)
		}
	}
	if n := r.count("SELECT count(*) FROM alarm_quarantine"); n != int64(len(cases)) {
		t.Fatalf("quarantine rows %d", n)
	}
	if n := r.count("SELECT count(*) FROM alarm_telemetry") + r.count("SELECT count(*) FROM alarm_instance") + r.count("SELECT count(*) FROM alarm_track"); n != 0 {
		t.Fatalf("bad input changed state (%d rows)", n)
	}
	// A device clock an hour ahead: kept at the receiving time, flagged.
	s := Sample{Gateway: "gw1", Device: "d1", Metric: "temp", Value: 30, Boot: 1, Seq: 1, DeviceAt: e.Clock.Now().Add(time.Hour)}
	if err := r.m.Ingest(ctx, Topic("gw1", "d1"), Encode(s)); err != nil {
		t.Fatal(err)
	}
	if n := r.count("SELECT count(*) FROM alarm_telemetry WHERE clock_flag = 'ahead' AND at = $1", e.Clock.Now()); n != 1 {
		t.Fatalf("the suspicious clock was not corrected and flagged")
	}
}

func itoa(n int64) string {
	b := []byte{}
	if n == 0 {
		return "0"
	}
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}
