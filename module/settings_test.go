package module_test

import (
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel/module"
)

func TestSettingsRefuseUnknownKeysAndRanges(t *testing.T) {
	t.Parallel()
	s := module.NewSettings("delivery", map[string]string{
		"delivery.ack_timout": "5s", // a typo of ack_timeout
		"delivery.window":     "0",
		"delivery.workers":    " 12 ",
		"delivery.heartbeat":  "",
		"reservation.zone":    "nowhere", // another module's: not ours to judge
	})
	ack := s.Duration("ack_timeout", time.Minute, time.Second, time.Hour)
	win := s.Int("window", 16, 1, 1024)
	workers := s.Int("workers", 200, 1, 10000)
	beat := s.Duration("heartbeat", 2*time.Second, time.Millisecond, time.Minute)
	if ack != time.Minute || win != 16 || workers != 12 || beat != 2*time.Second {
		t.Fatalf("values: ack %s window %d workers %d heartbeat %s", ack, win, workers, beat)
	}
	err := s.Err()
	if err == nil {
		t.Fatal("a typo and an out-of-range value were accepted")
	}
	for _, want := range []string{`unknown setting "delivery.ack_timout"`, `delivery.window="0": want an integer from 1 to 1024`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "reservation") {
		t.Errorf("error %q judges another module's key", err)
	}
}

func TestSettingsGetters(t *testing.T) {
	t.Parallel()
	s := module.NewSettings("m", map[string]string{
		"m.on": "false", "m.zone": "Asia/Shanghai", "m.mode": "fast", "m.hook": "https://example.com/x",
		"m.addr": "", "m.size": "10",
	})
	if s.Bool("on", true) || s.Zone("zone", "UTC").String() != "Asia/Shanghai" || s.OneOf("mode", "slow", "slow", "fast") != "fast" ||
		s.URL("hook", "") != "https://example.com/x" || s.String("addr", "127.0.0.1:1", nil) != "" || s.Int("absent", 7, 1, 9) != 7 {
		t.Fatal("a getter read its value wrongly")
	}
	size := s.Int("size", 1, 1, 100)
	s.Check(size <= 5, "m.size (%d) exceeds 5", size)
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "m.size (10) exceeds 5") {
		t.Fatalf("cross-setting rule: %v", err)
	}
	bad := module.NewSettings("m", map[string]string{"m.on": "yes please", "m.zone": "Mars/Base", "m.hook": "ftp://x", "m.mode": "warp"})
	bad.Bool("on", true)
	if bad.Zone("zone", "UTC") != time.UTC {
		t.Error("a bad zone did not fall back to the default")
	}
	bad.URL("hook", "")
	bad.OneOf("mode", "slow", "slow", "fast")
	err := bad.Err()
	for _, want := range []string{"true or false", "time zone", "http(s) URL", "slow, fast"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}
