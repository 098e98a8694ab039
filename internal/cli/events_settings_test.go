package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel/internal/cli"
)

// TestEventsRetentionSetting: the events outbox's horizon is a serve
// setting (default seven days), and a horizon under an hour is refused
// with a sentence before anything starts.
func TestEventsRetentionSetting(t *testing.T) {
	t.Parallel()
	env := func(string) string { return "" }
	o, err := cli.ResolveServe("", env, nil)
	if err != nil || o.EventsRetention != 7*24*time.Hour {
		t.Fatalf("default: %v %v", o, err)
	}
	if o, err = cli.ResolveServe("", env, map[string]string{"events-retention": "48h"}); err != nil || o.EventsRetention != 48*time.Hour {
		t.Fatalf("48h: %v %v", o, err)
	}
	for _, bad := range []string{"30m", "soon", "-1h"} {
		if _, err := cli.ResolveServe("", env, map[string]string{"events-retention": bad}); err == nil ||
			!strings.Contains(err.Error(), "events-retention") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
