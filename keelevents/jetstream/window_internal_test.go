package jetstream

import "testing"

func TestServerPins(t *testing.T) {
	for v, want := range map[string]bool{"2.9.10": false, "2.10.22": false, "2.11.0": true, "v2.15.2": true,
		"3.0.0": true, "": false, "2": false, "x.y": false} {
		if got := serverPins(v); got != want {
			t.Errorf("serverPins(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestServerRewinds(t *testing.T) {
	for v, want := range map[string]bool{"2.9.10": true, "2.9.25": true, "2.10.13": true, "2.10.14": false,
		"v2.10.22": false, "2.11.0-beta.1": false, "2.15.2": false, "3.0.0": false, "": true, "x": true} {
		if got := serverRewinds(v); got != want {
			t.Errorf("serverRewinds(%q) = %v, want %v", v, got, want)
		}
	}
}
