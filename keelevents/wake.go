package keelevents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/keelwork/keel/keeldriver"
)

// outboxTopic is the notification topic EmitTx notifies on PostgreSQL and
// relays listen to.
const outboxTopic = "events.outbox"

// notifyChannel is the PostgreSQL channel a keeldriver.Listener of schema
// ns uses for topic: keelpgx names channels "<ns>.<topic>", or a hash when
// that is longer than an identifier. Should the two ever disagree, relays
// still find events by polling, only later.
func notifyChannel(ns, topic string) string {
	if ns == "" {
		ns = "keel"
	}
	name := ns + "." + topic
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "keel_" + hex.EncodeToString(sum[:20])
}

// listenOutbox wakes the relay on every committed EmitTx of any process,
// reconnecting after errors, until ctx ends.
func (e *Events[TTx]) listenOutbox(ctx context.Context, d keeldriver.Driver[TTx]) {
	for ctx.Err() == nil {
		err := e.listenOnce(ctx, d)
		if ctx.Err() != nil {
			return
		}
		e.cfg.Logger.Warn("keelevents: outbox listener (relays poll meanwhile)", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (e *Events[TTx]) listenOnce(ctx context.Context, d keeldriver.Driver[TTx]) error {
	l := d.Listener()
	defer l.Close(context.WithoutCancel(ctx))
	if err := l.Connect(ctx); err != nil {
		return err
	}
	if err := l.Listen(ctx, outboxTopic); err != nil {
		return err
	}
	e.listening.Store(true)
	defer e.listening.Store(false)
	e.lookRelay() // what was emitted before the listener connected
	for {
		if _, err := l.WaitForNotification(ctx); err != nil {
			return err
		}
		e.lookRelay() // sent at commit: the event is there to read
	}
}
