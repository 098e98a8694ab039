package keelevents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/keelwork/keel/keelsql"
)

// Consumer is a named consumer of events with an inbox: its handler runs
// in a transaction that also writes the (consumer, topic, event id, digest)
// row, so the effect and the proof that it happened commit together.
type Consumer[TTx any] struct {
	// Name is the durable name, [a-z0-9_-]{1,64}; every instance of a
	// service uses the same one and they share the events.
	Name string
	// Topics are exact topics or "prefix.>" patterns.
	Topics []string
	// Ordered hands the events of one key (partition) to Handle one at a
	// time, in order; a failing event holds back the later ones.
	Ordered bool
	// MaxAttempts is the handler's budget (default DefaultMaxAttempts);
	// after it the event goes to manual, payload kept, for an operator to
	// replay.
	MaxAttempts int
	// AckWait and Backoff are passed to the bus (see Subscription).
	AckWait time.Duration
	Backoff []time.Duration
	// Handle applies the event in tx. An error rolls the transaction back
	// (inbox row included) and the event is redelivered.
	Handle func(ctx context.Context, tx keelsql.Tx[TTx], d *Delivery) error
}

type consumer[TTx any] struct {
	Consumer[TTx]
	e *Events[TTx]
}

// Consume registers a consumer; call it before Start.
func (e *Events[TTx]) Consume(c Consumer[TTx]) error {
	c.Topics = append([]string(nil), c.Topics...)
	sub := Subscription{Consumer: c.Name, Topics: c.Topics, Ordered: c.Ordered, AckWait: c.AckWait, Backoff: c.Backoff}
	if err := validateSubscription(&sub); err != nil {
		return err
	}
	if c.Handle == nil {
		return invalid("consumer %s has no Handle", c.Name)
	}
	if c.MaxAttempts < 0 || c.MaxAttempts > 1000 {
		return invalid("consumer %s: MaxAttempts must be 0..1000", c.Name)
	}
	c.MaxAttempts = cmp.Or(c.MaxAttempts, DefaultMaxAttempts)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started {
		return fmt.Errorf("keelevents: Consume(%s) after Start", c.Name)
	}
	if _, dup := e.consumers[c.Name]; dup {
		return invalid("consumer %s registered twice", c.Name)
	}
	e.consumers[c.Name] = &consumer[TTx]{Consumer: c, e: e}
	return nil
}

func (c *consumer[TTx]) subscription() Subscription {
	return Subscription{Consumer: c.Name, Topics: c.Topics, Ordered: c.Ordered, AckWait: c.AckWait, Backoff: c.Backoff}
}

// outcome of one delivery at the inbox.
type outcome int

const (
	applied outcome = iota
	duplicate
	quarantined
)

// handle is the bus handler of the consumer.
func (c *consumer[TTx]) handle(ctx context.Context, d *Delivery) error {
	e := c.e
	// The digest the inbox compares is the payload's own, whatever the bus
	// says: a message altered on the way is a different payload.
	digest := Digest(d.Payload)
	var out outcome
	err := e.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		out = applied
		n, err := tx.Exec(ctx, e.d.sql("InboxInsert"), c.Name, d.Topic, d.ID, digest, d.Key, string(d.Payload), "applied", d.Attempt, now())
		if err != nil {
			return fmt.Errorf("writing the inbox row: %w", err)
		}
		if n == 0 {
			out, err = c.seen(ctx, tx, d, digest)
			return err
		}
		return callHandle(ctx, c.Handle, tx, d)
	})
	if err == nil {
		switch out {
		case applied:
			e.m.applied.WithLabelValues(c.Name).Inc()
		case duplicate:
			e.m.duplicates.WithLabelValues(c.Name).Inc()
		}
		return nil
	}
	e.m.failures.WithLabelValues(c.Name).Inc()
	if d.Attempt < c.MaxAttempts || ctx.Err() != nil {
		return err
	}
	if merr := c.toManual(ctx, d, digest, err); merr != nil {
		return errors.Join(err, merr)
	}
	return nil
}

// seen handles an event already in the inbox: the same digest is a
// redelivery, counted and acknowledged; another digest is quarantined with
// both payloads and never applied.
func (c *consumer[TTx]) seen(ctx context.Context, tx keelsql.Tx[TTx], d *Delivery, digest string) (outcome, error) {
	e := c.e
	var prevDigest, prevPayload, state string
	if err := tx.QueryRow(ctx, e.d.sql("InboxGet"), c.Name, d.Topic, d.ID).Scan(&prevDigest, &prevPayload, &state); err != nil {
		return 0, fmt.Errorf("reading the inbox row: %w", err)
	}
	if prevDigest == digest {
		_, err := tx.Exec(ctx, e.d.sql("ConsumerDuplicate"), c.Name)
		return duplicate, err
	}
	var seen int
	err := tx.QueryRow(ctx, e.d.sql("QuarantineInsert"), c.Name, d.Topic, d.ID, d.Key, prevDigest, prevPayload,
		digest, string(d.Payload), now()).Scan(&seen)
	if err != nil {
		return 0, fmt.Errorf("quarantining: %w", err)
	}
	if seen == 1 {
		e.m.quarantined.WithLabelValues(c.Name).Inc()
		e.cfg.Logger.Warn("keelevents: event quarantined: same id, other payload", "consumer", c.Name,
			"topic", d.Topic, "id", d.ID, "digest", digest, "applied_digest", prevDigest)
	}
	return quarantined, nil
}

// toManual records an event whose handler failed past the budget, with its
// payload, and an inbox row in state manual so redeliveries are absorbed.
func (c *consumer[TTx]) toManual(ctx context.Context, d *Delivery, digest string, cause error) error {
	e := c.e
	ctx = context.WithoutCancel(ctx)
	msg := cause.Error()
	if len(msg) > 2000 {
		msg = msg[:2000]
	}
	return e.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		n, err := tx.Exec(ctx, e.d.sql("InboxInsert"), c.Name, d.Topic, d.ID, digest, d.Key, string(d.Payload), "manual", d.Attempt, now())
		if err != nil || n == 0 {
			return err // n == 0: applied meanwhile by another delivery
		}
		if _, err := tx.Exec(ctx, e.d.sql("ManualInsert"), c.Name, d.Topic, d.ID, d.Key, d.Type, d.Partition,
			string(d.Payload), encodeHeaders(d.Headers), digest, d.EmittedAt.UTC(), d.Attempt, msg, now()); err != nil {
			return fmt.Errorf("recording a manual event: %w", err)
		}
		e.m.manual.WithLabelValues(c.Name).Inc()
		e.cfg.Logger.Warn("keelevents: event sent to manual", "consumer", c.Name, "topic", d.Topic, "id", d.ID,
			"attempts", d.Attempt, "err", msg)
		return nil
	})
}

func callHandle[TTx any](ctx context.Context, h func(context.Context, keelsql.Tx[TTx], *Delivery) error, tx keelsql.Tx[TTx], d *Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("keelevents: handler panicked: %v", r)
		}
	}()
	return h(ctx, tx, d)
}

// ApplyIfNewer is the guard of a version-monotonic projection: in tx, it
// records version as the projection's current one for key and returns true
// only if it is newer than the one recorded. An older (or equal) version
// is not applied; an older one is recorded as stale, for inspection.
func (e *Events[TTx]) ApplyIfNewer(ctx context.Context, tx keelsql.Tx[TTx], projection, key string, version int64) (bool, error) {
	if projection == "" || len(projection) > 100 || key == "" || len(key) > MaxKey {
		return false, invalid("projection and key must be 1..100 and 1..%d bytes", MaxKey)
	}
	n, err := tx.Exec(ctx, e.d.sql("VersionApply"), projection, key, version, now())
	if err != nil {
		return false, fmt.Errorf("applying version %d of %s/%s: %w", version, projection, key, err)
	}
	if n == 1 {
		return true, nil
	}
	var current int64
	if err := tx.QueryRow(ctx, e.d.sql("VersionGet"), projection, key).Scan(&current); err != nil {
		return false, fmt.Errorf("reading the version of %s/%s: %w", projection, key, err)
	}
	if version < current {
		if _, err := tx.Exec(ctx, e.d.sql("VersionStale"), projection, key, version, current, now()); err != nil {
			return false, fmt.Errorf("recording a stale version: %w", err)
		}
		e.m.staleVersions.WithLabelValues(projection).Inc()
	}
	return false, nil
}

func topicsJSON(topics []string) string {
	b, _ := json.Marshal(topics)
	return string(b)
}
