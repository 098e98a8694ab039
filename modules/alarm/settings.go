package alarm

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/keelwork/keel/module"
)

// Settings are the module's settings ("alarm.<key>").
type Settings struct {
	// MQTTURL is the broker the consumers connect to ("" with Demo: an
	// embedded broker; "" otherwise: no consumer).
	MQTTURL string
	// ClientPrefix names this instance's consumer sessions (persistent:
	// a restarted consumer of the same name receives what it did not ack).
	ClientPrefix string
	// ShareGroup is the shared subscription's group.
	ShareGroup string
	Consumers  int
	// WebhookURL receives notices ("" = none configured: notices wait).
	WebhookURL string
	// EmbeddedAddr is the embedded broker's listener (keel dev).
	EmbeddedAddr string

	GroupWait, GroupInterval, RepeatInterval time.Duration
	// SevereWorkers, OrdinaryWorkers: engine workers of each queue; the
	// severe ones are reserved for severe notices.
	SevereWorkers, OrdinaryWorkers int
	// SevereRate and OrdinaryRate split the channel quota (per second).
	SevereRate, OrdinaryRate float64
	MaxAttempts              int
	// Watermarks of the ordinary backlog (samples awaiting evaluation).
	LowWater, HighWater, StormWater int64
	SampleEvery                     int
	// ReplayRates are the staircase's steps (per second) and ReplayWindow
	// each step's observation window.
	ReplayRates  []int
	ReplayWindow time.Duration
	SevereBound  time.Duration
	ReplayAuto   bool
	EvalBatch    int
	// EvalRate caps ordinary evaluation (samples per second; 0: none).
	EvalRate int
	// ReservedConns is how many database connections ordinary work leaves
	// free for the severe lane (ordinary writers are capped at
	// PoolSize-ReservedConns).
	PoolSize, ReservedConns int
	DemoDevices             int
	DemoInterval            time.Duration
	// SMSTo are the on-call phones severe notices also go to by SMS, sent
	// as the SMS platform's account SMSAccount at SMSRate per second (the
	// channel is offered only when a module offers an SMS sender).
	SMSTo      []string
	SMSAccount string
	SMSRate    float64
}

func parseSettings(m map[string]string, demo bool) (*Settings, error) {
	s := module.NewSettings(Name, m)
	out := &Settings{
		MQTTURL:         s.String("mqtt_url", "", nil),
		ClientPrefix:    s.String("client_prefix", "keel-alarm", nil),
		ShareGroup:      s.String("share_group", "keel-alarm", nil),
		Consumers:       s.Int("consumers", 2, 1, 16),
		WebhookURL:      s.URL("webhook_url", ""),
		EmbeddedAddr:    s.String("embedded_addr", "127.0.0.1:1884", nil),
		GroupWait:       s.Duration("group_wait", 60*time.Second, 0, time.Hour),
		GroupInterval:   s.Duration("group_interval", 60*time.Second, 0, 24*time.Hour),
		RepeatInterval:  s.Duration("repeat_interval", 4*time.Hour, time.Second, 7*24*time.Hour),
		SevereWorkers:   s.Int("severe_workers", 4, 1, 256),
		OrdinaryWorkers: s.Int("ordinary_workers", 4, 1, 256),
		SevereRate:      float64(s.Int("severe_rate", 300, 1, 100000)),
		OrdinaryRate:    float64(s.Int("ordinary_rate", 700, 1, 100000)),
		MaxAttempts:     s.Int("max_attempts", 6, 1, 100),
		LowWater:        int64(s.Int("low_water", 2000, 1, 1<<30)),
		HighWater:       int64(s.Int("high_water", 20000, 1, 1<<30)),
		StormWater:      int64(s.Int("storm_water", 50000, 1, 1<<30)),
		SampleEvery:     s.Int("sample_every", 10, 2, 1000),
		ReplayWindow:    s.Duration("replay_window", 2*time.Minute, 0, time.Hour),
		SevereBound:     s.Duration("severe_bound", 2*time.Second, time.Millisecond, time.Hour),
		ReplayAuto:      s.Bool("replay_auto", false),
		EvalBatch:       s.Int("eval_batch", 500, 1, 10000),
		EvalRate:        s.Int("eval_rate", 0, 0, 1000000),
		PoolSize:        s.Int("pool_size", 8, 2, 1000),
		ReservedConns:   s.Int("reserved_conns", 2, 1, 100),
		DemoDevices:     s.Int("demo_devices", 50, 0, 100000),
		DemoInterval:    s.Duration("demo_interval", 5*time.Second, 10*time.Millisecond, time.Hour),
	}
	out.SMSAccount = s.String("sms_account", "", nil)
	out.SMSRate = float64(s.Int("sms_rate", 10, 1, 10000))
	s.String("sms_to", "", func(v string) error {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); !phonePattern.MatchString(p) {
				return fmt.Errorf("comma-separated phone numbers, %q is not one", p)
			}
			out.SMSTo = append(out.SMSTo, p)
		}
		return nil
	})
	scale := s.Int("replay_scale_percent", 100, 1, 1000)
	for _, r := range []int{300, 500, 700} {
		out.ReplayRates = append(out.ReplayRates, max(1, r*scale/100))
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if out.ReservedConns >= out.PoolSize {
		return nil, fmt.Errorf("alarm.reserved_conns (%d) must be below alarm.pool_size (%d)", out.ReservedConns, out.PoolSize)
	}
	if !(out.LowWater < out.HighWater && out.HighWater <= out.StormWater) {
		return nil, fmt.Errorf("alarm watermarks must rise: low_water < high_water <= storm_water")
	}
	if len(out.SMSTo) > 0 && out.SMSAccount == "" {
		return nil, fmt.Errorf("alarm.sms_to needs alarm.sms_account (the SMS platform account the messages go out as)")
	}
	_ = demo
	return out, nil
}

var phonePattern = regexp.MustCompile(`^\+?[0-9]{5,20}$`)
