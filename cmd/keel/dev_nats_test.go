package main

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var natsLine = regexp.MustCompile(`keel dev: embedded NATS JetStream at (nats://127\.0\.0\.1:\d+) \(store `)

// assertDevJetStream checks that keel dev's embedded broker answers with
// JetStream on loopback.
func assertDevJetStream(t *testing.T, url string) {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("keel dev's embedded NATS at %s: %v", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("keel dev's embedded NATS at %s has no JetStream: %v", url, err)
	}
}
