package keelevents

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Event is what a business transaction emits (EmitTx).
type Event struct {
	// Topic is dot-separated tokens of [a-z0-9_-], 1..200 bytes in all:
	// "payment.succeeded".
	Topic string
	// ID is the stable id of the business intent that caused the event
	// (ledger id, payment order + action, waybill + source event), unique per
	// topic: [A-Za-z0-9_.:/-]{1,200}. Never random: republishing reuses it.
	ID string
	// Key is the ordering key (the aggregate: order id, SKU, waybill),
	// printable UTF-8, 1..200 bytes. Events of one key are published and,
	// for ordered consumers, handled in emit order.
	Key string
	// Type is optional; it defaults to Topic.
	Type string
	// Payload is valid JSON of at most MaxPayload bytes.
	Payload json.RawMessage
	// Headers are optional and small (see MaxHeaders).
	Headers map[string]string
}

// Message is an event as it travels on a bus.
type Message struct {
	Topic, ID, Key, Type string
	// Partition is hash(Key) mod the configured partition count, which is
	// fixed per database.
	Partition int
	Payload   []byte
	Headers   map[string]string
	// Digest is the hex SHA-256 of Payload, computed by the outbox.
	Digest string
	// EmittedAt is the UTC time EmitTx wrote the event.
	EmittedAt time.Time
}

// ErrOutcomeUnknown says a publish may or may not have been stored (a
// timeout, a lost connection). The relay then republishes the same message
// with the same Topic and ID; it never mints a new id.
var ErrOutcomeUnknown = errors.New("keelevents: publish outcome unknown")

// Bus carries messages from the relay to subscribers. Every implementation
// passes the suite in keelevents/bustest.
type Bus interface {
	// Name is "jetstream", "database", ...
	Name() string
	// Publish stores msgs durably, in order, returning how many leading msgs
	// the bus acknowledged. If err wraps ErrOutcomeUnknown, msgs[n] may be
	// stored; the relay republishes it with the same Topic and ID and the bus
	// must absorb the duplicate (JetStream: Nats-Msg-Id = Topic+"/"+ID in the
	// stream's duplicate window; database: unique key).
	Publish(ctx context.Context, msgs []Message) (int, error)
	// Subscribe delivers every message on sub.Topics published after the
	// durable consumer sub.Consumer was first created, at least once, until
	// ctx ends or the Subscriber stops. h returning nil acknowledges; an
	// error redelivers after sub.Backoff (attempt-indexed, last entry
	// repeats). With sub.Ordered, messages of one partition reach h one at a
	// time in publish order, and a redelivery holds back later messages of
	// that partition.
	Subscribe(ctx context.Context, sub Subscription, h Handler) (Subscriber, error)
	// Close stops every subscriber and releases the bus's resources.
	Close() error
}

// Subscription names a durable consumer and what it receives.
type Subscription struct {
	// Consumer is the durable name, [a-z0-9_-]{1,64}. Two Subscribe calls
	// with the same Consumer (two instances) share its messages.
	Consumer string
	// Topics are exact topics, or "prefix.>" for everything under a prefix.
	Topics []string
	// Ordered delivers one message per partition at a time, in order.
	Ordered bool
	// AckWait is how long a delivery may stay unacknowledged before it is
	// redelivered (default DefaultAckWait).
	AckWait time.Duration
	// Backoff is the wait before redelivering after a handler error, by
	// attempt; the last entry repeats (default DefaultBackoff).
	Backoff []time.Duration
	// InFlight asks for at least this many handler calls in flight per
	// instance of an unordered subscription (0: the bus's default). A
	// consumer that commits deliveries in batches asks for enough to fill
	// them: its waiting calls cost a goroutine each, not a transaction.
	// Ordered subscriptions have one call per partition whatever it says.
	InFlight int
	// Window, with Ordered and HandleWindow, lets a bus that can make one
	// instance the owner of a partition keep up to Window deliveries of
	// each partition in flight and hand them to HandleWindow together
	// (0 or 1: one at a time). A bus that cannot (the database bus, a
	// JetStream server older than 2.11) delivers one at a time to the
	// Handler, as without it.
	Window int
	// HandleWindow takes the deliveries a windowed ordered subscription
	// has ready, each partition's in publish order, one call at a time per
	// instance, and returns one error per delivery (nil: acknowledge).
	// Once a delivery of a partition fails, the later ones of that
	// partition in ds must not be applied and must fail too: the bus
	// retries the failed one in place after Backoff, with the later ones
	// behind it.
	HandleWindow func(ctx context.Context, ds []*Delivery) []error
	// WindowBatch bounds the deliveries of one HandleWindow call (default
	// and at most MaxBatch). A call's deliveries are acknowledged when it
	// returns, and the server refills the windows while the next call
	// runs: a call of a transaction's worth keeps that going.
	WindowBatch int
}

// MaxWindow bounds Subscription.Window.
const MaxWindow = 1024

// MaxInFlight bounds Subscription.InFlight.
const MaxInFlight = 4096

// DefaultAckWait is Subscription.AckWait's default.
const DefaultAckWait = 30 * time.Second

// DefaultBackoff is Subscription.Backoff's default.
var DefaultBackoff = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second}

// Delivery is one delivery of a message to a handler.
type Delivery struct {
	Message
	// Attempt is 1 for the first delivery.
	Attempt int
}

// Handler handles a delivery; nil acknowledges it, an error redelivers it.
type Handler func(ctx context.Context, d *Delivery) error

// Subscriber is a running subscription.
type Subscriber interface {
	// Stop stops delivering; in-flight h calls finish (ctx bounds the wait).
	Stop(ctx context.Context) error
}

// BackoffFor returns the wait before delivery attempt+1 after attempt
// failed: b[attempt-1], the last entry repeating, DefaultBackoff if b is
// empty.
func BackoffFor(b []time.Duration, attempt int) time.Duration {
	if len(b) == 0 {
		b = DefaultBackoff
	}
	i := attempt - 1
	if i < 0 {
		i = 0
	}
	if i >= len(b) {
		i = len(b) - 1
	}
	return b[i]
}
