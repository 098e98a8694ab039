package alarm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
)

// Devices publish one sample per message on
//
//	keel/alarm/v1/<gateway>/<device>/telemetry
//
// with a JSON body {"metric":"temp","value":81.5,"boot":3,"seq":17,
// "ts":1767225600000} (ts in unix milliseconds of the device's clock; boot
// is the device's boot epoch, raised on every restart, so that a sequence
// that starts again at 1 is recognised as new rather than late).
const (
	TopicPrefix = "keel/alarm/v1/"
	// TopicFilter is what the consumers subscribe to (shared: see
	// SharedFilter).
	TopicFilter = TopicPrefix + "+/+/telemetry"
	// MaxPayload bounds a message body; longer ones are quarantined.
	MaxPayload = 1024
)

// SharedFilter is the subscription every instance of a group shares, so
// the broker gives each message to one of them.
func SharedFilter(group string) string { return "$share/" + group + "/" + TopicFilter }

// Sample is one parsed telemetry message.
type Sample struct {
	Gateway  string    `json:"gateway"`
	Device   string    `json:"device"`
	Metric   string    `json:"metric"`
	Value    float64   `json:"value"`
	Boot     int64     `json:"boot"`
	Seq      int64     `json:"seq"`
	DeviceAt time.Time `json:"device_at"`
	// Debug marks diagnostic telemetry that backpressure pauses first.
	Debug bool `json:"debug,omitempty"`
}

// BadInput is why a message was quarantined; Reason is a stable code.
type BadInput struct {
	Reason string
	Detail string
}

func (e *BadInput) Error() string { return e.Reason + ": " + e.Detail }

// Quarantine reasons.
const (
	BadTopic         = "bad_topic"
	BadPayload       = "bad_payload"
	BadValue         = "absurd_value"
	BadUnknownDevice = "unknown_device"
)

func bad(reason, format string, args ...any) error {
	return &BadInput{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// ReasonOf is the quarantine reason of err ("" for none).
func ReasonOf(err error) string {
	var b *BadInput
	if errors.As(err, &b) {
		return b.Reason
	}
	return ""
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$`)
var metricPattern = regexp.MustCompile(`^[a-z][a-z0-9_.]{0,31}$`)

// ParseTopic reads the gateway and device of a telemetry topic.
func ParseTopic(topic string) (gateway, device string, err error) {
	rest, ok := strings.CutPrefix(topic, TopicPrefix)
	if !ok {
		return "", "", bad(BadTopic, "topic %q is not under %s", trunc(topic, 80), TopicPrefix)
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[2] != "telemetry" {
		return "", "", bad(BadTopic, "topic %q is not <gateway>/<device>/telemetry", trunc(topic, 80))
	}
	if !idPattern.MatchString(parts[0]) || !idPattern.MatchString(parts[1]) {
		return "", "", bad(BadTopic, "gateway or device id in %q is not [A-Za-z0-9_.-]{1,64}", trunc(topic, 80))
	}
	return parts[0], parts[1], nil
}

type wirePayload struct {
	Metric *string  `json:"metric"`
	Value  *float64 `json:"value"`
	Boot   *int64   `json:"boot"`
	Seq    *int64   `json:"seq"`
	TS     *int64   `json:"ts"`
	Debug  bool     `json:"debug"`
}

// Parse reads one message: its topic and body. Every refusal is a
// *BadInput; nothing here touches the database.
func Parse(topic string, body []byte) (Sample, error) {
	gw, dev, err := ParseTopic(topic)
	if err != nil {
		return Sample{}, err
	}
	if len(body) > MaxPayload {
		return Sample{}, bad(BadPayload, "payload of %d bytes is over %d", len(body), MaxPayload)
	}
	var w wirePayload
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Sample{}, bad(BadPayload, "payload is not the telemetry JSON object: %v", err)
	}
	if dec.More() {
		return Sample{}, bad(BadPayload, "payload has data after its JSON object")
	}
	if w.Metric == nil || w.Value == nil || w.Boot == nil || w.Seq == nil || w.TS == nil {
		return Sample{}, bad(BadPayload, "payload needs metric, value, boot, seq and ts")
	}
	if !metricPattern.MatchString(*w.Metric) {
		return Sample{}, bad(BadPayload, "metric %q is not [a-z][a-z0-9_.]{0,31}", trunc(*w.Metric, 40))
	}
	if *w.Boot < 0 || *w.Seq < 1 || *w.Boot > 1<<40 || *w.Seq > 1<<53 {
		return Sample{}, bad(BadPayload, "boot %d / seq %d out of range", *w.Boot, *w.Seq)
	}
	v := *w.Value
	if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 1e12 {
		return Sample{}, bad(BadValue, "value %v is not a plausible reading", v)
	}
	// Year 2000 to 2200: anything else is not a clock, just a number.
	if *w.TS < 946684800000 || *w.TS > 7258118400000 {
		return Sample{}, bad(BadPayload, "ts %d is not unix milliseconds", *w.TS)
	}
	return Sample{Gateway: gw, Device: dev, Metric: *w.Metric, Value: v, Boot: *w.Boot, Seq: *w.Seq,
		DeviceAt: time.UnixMilli(*w.TS).UTC(), Debug: w.Debug}, nil
}

// Encode is the body a device publishes for s (the simulator's, tests').
func Encode(s Sample) []byte {
	b, _ := json.Marshal(map[string]any{"metric": s.Metric, "value": s.Value, "boot": s.Boot, "seq": s.Seq,
		"ts": s.DeviceAt.UnixMilli(), "debug": s.Debug})
	return b
}

// Topic is where device dev behind gateway gw publishes.
func Topic(gw, dev string) string { return TopicPrefix + gw + "/" + dev + "/telemetry" }

// Clock flags: a device clock too far from the receiving time is not
// trusted; the sample is kept at the receiving time and flagged.
const (
	ClockAhead  = "ahead"
	ClockBehind = "behind"
)

// MaxClockAhead is how far a device clock may run ahead of ours;
// MaxClockBehind how far behind (a broker backlog delays messages
// legitimately, so behind is allowed much more).
const (
	MaxClockAhead  = 5 * time.Minute
	MaxClockBehind = 24 * time.Hour
)

// CorrectClock returns the time to use for a sample and its flag.
func CorrectClock(deviceAt, received time.Time) (time.Time, string) {
	switch d := deviceAt.Sub(received); {
	case d > MaxClockAhead:
		return received, ClockAhead
	case d < -MaxClockBehind:
		return received, ClockBehind
	}
	return deviceAt, ""
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
