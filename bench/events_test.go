package main

import (
	"context"
	"testing"
	"time"
)

// TestEventsRelayBoth runs a tiny events relay of each side on the test
// database and NATS (KEEL_TEST_NATS_URL, which scripts/test.sh provides):
// both return only once the broker stored every event. It makes no claim
// about speed.
func TestEventsRelayBoth(t *testing.T) {
	url := needDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := &runConfig{DatabaseURL: url, Mode: "events", N: 1000}
	for name, run := range map[string]func(context.Context, *runConfig, string) (*Result, error){
		"keel": runKeelRelay, "watermill": runWatermillRelay,
	} {
		r, err := run(ctx, cfg, defaultNATSURL())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Jobs != cfg.N || r.JobsPerSec <= 0 {
			t.Errorf("%s: %d events at %.0f/s; want %d", name, r.Jobs, r.JobsPerSec, cfg.N)
		}
	}
}
