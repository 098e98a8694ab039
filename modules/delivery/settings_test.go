package delivery

import (
	"strings"
	"testing"
	"time"
)

// TestSettingsRefuseTypos: a misspelt key is refused rather than silently
// leaving the default in force, and so is a value out of its range.
func TestSettingsRefuseTypos(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		set  map[string]string
		want string
	}{
		{map[string]string{"delivery.ack_timout": "5s"}, `unknown setting "delivery.ack_timout"`},
		{map[string]string{"delivery.window": "0"}, "delivery.window"},
		{map[string]string{"delivery.ack_timeout": "-1s"}, "delivery.ack_timeout"},
		{map[string]string{"delivery.gateway_id": "4194304"}, "delivery.gateway_id"},
		{map[string]string{"delivery.one_sender": "maybe"}, "true or false"},
	} {
		if _, err := parseSettings(c.set); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %s", c.set, err, c.want)
		}
	}
	s, err := parseSettings(map[string]string{"delivery.ack_timeout": "3s", "delivery.ack_inline": "10s",
		"delivery.cmpp_addr": "off", "delivery.heartbeat": "", "reservation.zone": "UTC"})
	if err != nil {
		t.Fatal(err)
	}
	if s.AckTimeout != 3*time.Second || s.AckInline != 1500*time.Millisecond || s.CMPPAddr != "off" || s.Heartbeat != DefaultHeartbeat {
		t.Fatalf("parsed %+v", s)
	}
}
