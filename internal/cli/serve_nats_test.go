package cli

import (
	"strings"
	"testing"
)

func TestNATSURLSetting(t *testing.T) {
	env := func(k string) string {
		if k == "KEEL_NATS_URL" {
			return "nats://10.0.0.1:4222,nats://10.0.0.2:4222"
		}
		return ""
	}
	o, err := ResolveServe("", env, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.NATSURL != "nats://10.0.0.1:4222,nats://10.0.0.2:4222" {
		t.Fatalf("from the environment: %q", o.NATSURL)
	}
	o, err = ResolveServe("", env, map[string]string{"nats-url": "tls://broker:4222"})
	if err != nil || o.NATSURL != "tls://broker:4222" {
		t.Fatalf("the flag wins: %q %v", o.NATSURL, err)
	}
	for _, bad := range []string{"http://x:4222", "broker", "nats://"} {
		if _, err := ResolveServe("", func(string) string { return "" }, map[string]string{"nats-url": bad}); err == nil ||
			!strings.Contains(err.Error(), "nats-url") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if o, err := ResolveServe("", func(string) string { return "" }, nil); err != nil || o.NATSURL != "" {
		t.Fatalf("default: %q %v (the database carries events)", o.NATSURL, err)
	}
}
