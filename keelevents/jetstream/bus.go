package jetstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/keelwork/keel/keelevents"
)

// Defaults of Config.
const (
	DefaultPartitions      = 16
	DefaultDuplicateWindow = 2 * time.Minute
	DefaultMaxAge          = 7 * 24 * time.Hour
	DefaultPublishTimeout  = 5 * time.Second
	DefaultConcurrency     = 32
	DefaultMaxAckPending   = 1024
)

// Config describes a JetStream bus.
type Config struct {
	// URL of the server or cluster ("nats://host:4222", comma-separated
	// for several). Ignored when Conn is set.
	URL string
	// Conn, if set, is used instead of dialling URL; Close leaves it open.
	Conn *nats.Conn
	// Options are added to the connection's (credentials, TLS, ...).
	Options []nats.Option
	// Partitions is the partition count of the outbox (fixed per
	// database): an ordered subscription keeps one JetStream consumer per
	// partition. Default DefaultPartitions.
	Partitions int
	// DuplicateWindow is how long a stream remembers Nats-Msg-Id values to
	// drop a republished message. It should cover the relay's retry
	// horizon: a relay lease's expiry plus its republish delay. A republish
	// after it is stored again and absorbed by the consumers' inbox. The
	// server keeps the ids of the window in memory (about 100 bytes each).
	// Default DefaultDuplicateWindow.
	DuplicateWindow time.Duration
	// MaxAge is how long streams keep messages, at least the consumers'
	// replay window. Default DefaultMaxAge.
	MaxAge time.Duration
	// Replicas of each stream (1..5; 3 on a cluster). Default 1.
	Replicas int
	// PublishTimeout bounds the wait for a batch's acknowledgements; past
	// it the outcome of the unacknowledged messages is unknown. Default
	// DefaultPublishTimeout.
	PublishTimeout time.Duration
	// Concurrency is the number of handler calls in flight per unordered
	// subscription. Default DefaultConcurrency.
	Concurrency int
	// MaxAckPending bounds an unordered consumer's unacknowledged
	// deliveries across all its instances. Default DefaultMaxAckPending.
	MaxAckPending int
	// MaxWindow caps the window of ordered subscriptions
	// (keelevents.Subscription.Window): 1 keeps every ordered consumer at
	// one delivery in flight per partition, for instance while instances of
	// an older release share its consumers. 0: as each subscription asks.
	// A window needs a server with pinned consumers (2.11 and later);
	// against an older one it is 1 whatever this says.
	MaxWindow int
	// MaxDeliver caps deliveries of one message; past it the server drops
	// the message. 0 (the default) is unlimited: the inbox, not the bus,
	// decides when a message goes to manual handling.
	MaxDeliver int
	// InactiveThreshold, if set, lets the server delete a consumer that no
	// instance has pulled from for that long (for throwaway subscribers,
	// such as tests on a shared server). Zero keeps consumers forever.
	InactiveThreshold time.Duration
	// HealEvery is how often, against a server before 2.10.14, each
	// subscriber checks that the server has not lost its consumers'
	// positions (heal.go) and heals those it has. Default
	// DefaultHealEvery; negative turns the check off. Newer servers need
	// no check.
	HealEvery time.Duration
	// Namespace replaces "keel" in subjects and stream names, for several
	// deployments on one NATS cluster: [a-z0-9_-]{1,32}.
	Namespace string
	// Logger; nil discards.
	Logger *slog.Logger
}

// Bus is the JetStream implementation of keelevents.Bus.
type Bus struct {
	cfg    Config
	names  names
	nc     *nats.Conn
	ownsNC bool
	js     jetstream.JetStream
	log    *slog.Logger

	mu      sync.Mutex
	streams map[string]bool // first token -> stream ensured
	subs    map[*subscriber]struct{}
	closed  bool
}

var _ keelevents.Bus = (*Bus)(nil)

// New connects (unless cfg.Conn is given) and returns a bus. The
// connection reconnects by itself, forever; publishes are not buffered
// while it is down, so every publish's outcome is known or reported
// unknown, never silently queued.
func New(ctx context.Context, cfg Config) (*Bus, error) {
	c := cfg
	if c.Partitions <= 0 {
		c.Partitions = DefaultPartitions
	}
	if c.DuplicateWindow <= 0 {
		c.DuplicateWindow = DefaultDuplicateWindow
	}
	if c.MaxAge <= 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.PublishTimeout <= 0 {
		c.PublishTimeout = DefaultPublishTimeout
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = DefaultMaxAckPending
	}
	if c.HealEvery == 0 {
		c.HealEvery = DefaultHealEvery
	}
	if c.MaxAckPending < c.Concurrency {
		c.MaxAckPending = c.Concurrency
	}
	if c.DuplicateWindow > c.MaxAge {
		return nil, fmt.Errorf("jetstream: the duplicate window (%s) cannot exceed the streams' max age (%s)", c.DuplicateWindow, c.MaxAge)
	}
	if c.Namespace != "" && !namespaceRE.MatchString(c.Namespace) {
		return nil, fmt.Errorf("jetstream: namespace %q is not [a-z0-9_-]{1,32}", c.Namespace)
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	b := &Bus{cfg: c, names: newNames(c.Namespace), log: log, streams: map[string]bool{}, subs: map[*subscriber]struct{}{}}
	if c.Conn != nil {
		b.nc = c.Conn
	} else {
		if c.URL == "" {
			return nil, errors.New("jetstream: a NATS URL is required")
		}
		opts := append([]nats.Option{
			nats.Name("keel"),
			nats.MaxReconnects(-1),
			nats.ReconnectWait(250 * time.Millisecond),
			nats.ReconnectJitter(100*time.Millisecond, time.Second),
			// No buffering while disconnected: a publish then fails at once
			// (not stored, known) instead of waiting in a buffer whose fate
			// nobody reports.
			nats.ReconnectBufSize(-1),
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
				if err != nil { // nil: the bus closed the connection itself
					log.Warn("jetstream: disconnected from NATS", "error", err)
				}
			}),
			nats.ReconnectHandler(func(nc *nats.Conn) {
				log.Info("jetstream: reconnected to NATS", "url", nc.ConnectedUrlRedacted())
			}),
			nats.ErrorHandler(func(_ *nats.Conn, s *nats.Subscription, err error) {
				log.Warn("jetstream: NATS error", "error", err)
			}),
		}, c.Options...)
		nc, err := nats.Connect(c.URL, opts...)
		if err != nil {
			return nil, fmt.Errorf("connecting to NATS at %s: %w", c.URL, err)
		}
		b.nc, b.ownsNC = nc, true
	}
	js, err := jetstream.New(b.nc,
		jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithPublishAsyncTimeout(c.PublishTimeout))
	if err != nil {
		b.closeConn()
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	b.js = js
	// Fail early, with a sentence, when the server has no JetStream.
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(actx); err != nil {
		b.closeConn()
		return nil, fmt.Errorf("JetStream is not available on NATS at %s (is the server started with -js?): %w", c.URL, err)
	}
	if v := b.nc.ConnectedServerVersion(); serverRewinds(v) {
		log.Warn("jetstream: this NATS server can lose a consumer's position when an instance dies (fixed in 2.10.14); "+
			"Keel checks and heals its consumers every HealEvery, but upgrading is recommended", "server", v, "heal_every", c.HealEvery)
	}
	return b, nil
}

// Name is "jetstream".
func (b *Bus) Name() string { return "jetstream" }

// Conn is the bus's NATS connection.
func (b *Bus) Conn() *nats.Conn { return b.nc }

// Partitions is the partition count ordered subscriptions use.
func (b *Bus) Partitions() int { return b.cfg.Partitions }

// Close stops every subscriber (in-flight handlers get 10 seconds) and
// closes the connection if the bus opened it.
func (b *Bus) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	subs := make([]*subscriber, 0, len(b.subs))
	for s := range b.subs {
		subs = append(subs, s)
	}
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var first error
	for _, s := range subs {
		if err := s.Stop(ctx); err != nil && first == nil {
			first = err
		}
	}
	b.closeConn()
	return first
}

func (b *Bus) closeConn() {
	if b.ownsNC {
		b.nc.Close()
	}
}

// ensureStream creates or updates the stream of a topic prefix, once per
// bus (again after the server said it has no such stream).
func (b *Bus) ensureStream(ctx context.Context, first string) error {
	b.mu.Lock()
	ok := b.streams[first]
	b.mu.Unlock()
	if ok {
		return nil
	}
	_, err := b.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        b.names.streamName(first),
		Description: "Keel events of topics " + first + ".*",
		Subjects:    []string{b.names.streamSubject(first)},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      b.cfg.MaxAge,
		Storage:     jetstream.FileStorage,
		Replicas:    b.cfg.Replicas,
		Duplicates:  b.cfg.DuplicateWindow,
	})
	if err != nil {
		return fmt.Errorf("creating or updating stream %s: %w", b.names.streamName(first), err)
	}
	b.mu.Lock()
	b.streams[first] = true
	b.mu.Unlock()
	return nil
}

func (b *Bus) forgetStream(first string) {
	b.mu.Lock()
	delete(b.streams, first)
	b.mu.Unlock()
}

// Publish sends msgs pipelined (every message is written before any
// acknowledgement is awaited), then reads the acknowledgements in order.
// It returns the count of leading messages the server stored. A timeout
// or a lost connection while waiting makes that message's outcome (and
// the later ones') unknown: err then wraps keelevents.ErrOutcomeUnknown.
// A message the server refused, or one that never left the client, is a
// plain error: it was not stored.
func (b *Bus) Publish(ctx context.Context, msgs []keelevents.Message) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	if b.nc.IsClosed() {
		return 0, errors.New("jetstream: publishing on a closed bus")
	}
	out := make([]*nats.Msg, len(msgs))
	maxPayload := b.nc.MaxPayload()
	for i := range msgs {
		m := &msgs[i]
		if !validTopic(m.Topic) {
			return 0, fmt.Errorf("jetstream: message %d: topic %q is not dot-separated tokens of [a-z0-9_-]", i, m.Topic)
		}
		if m.Partition < 0 || m.Partition >= b.cfg.Partitions {
			return 0, fmt.Errorf("jetstream: message %s: partition %d outside 0..%d (the bus is configured for %d partitions)",
				msgID(m), m.Partition, b.cfg.Partitions-1, b.cfg.Partitions)
		}
		nm, err := encode(m, b.names.subject(m.Topic, m.Partition))
		if err != nil {
			return 0, err
		}
		if maxPayload > 0 && int64(len(nm.Data)+headerSize(nm.Header)) > maxPayload {
			return 0, fmt.Errorf("jetstream: message %s is %d bytes with headers, over the server's max_payload %d",
				msgID(m), len(nm.Data)+headerSize(nm.Header), maxPayload)
		}
		out[i] = nm
		first, _ := splitTopic(m.Topic)
		if err := b.ensureStream(ctx, first); err != nil {
			return 0, err
		}
	}

	futures := make([]jetstream.PubAckFuture, 0, len(out))
	var sendErr error
	for i, nm := range out {
		first, _ := splitTopic(msgs[i].Topic)
		f, err := b.js.PublishMsgAsync(nm,
			jetstream.WithExpectStream(b.names.streamName(first)),
			// No retry after "no responders": a retried message could be
			// stored after the next one, out of order.
			jetstream.WithRetryAttempts(0))
		if err != nil {
			sendErr = err
			break
		}
		futures = append(futures, f)
	}

	timer := time.NewTimer(b.cfg.PublishTimeout)
	defer timer.Stop()
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return i, b.ackError(&msgs[i], err)
		case <-ctx.Done():
			return i, fmt.Errorf("%w: waiting for the acknowledgement of %s: %w", keelevents.ErrOutcomeUnknown, msgID(&msgs[i]), ctx.Err())
		case <-timer.C:
			return i, fmt.Errorf("%w: no acknowledgement of %s within %s", keelevents.ErrOutcomeUnknown, msgID(&msgs[i]), b.cfg.PublishTimeout)
		}
	}
	if sendErr != nil {
		n := len(futures)
		return n, fmt.Errorf("jetstream: sending %s: %w", msgID(&msgs[n]), sendErr)
	}
	return len(msgs), nil
}

// ackError classifies a failed acknowledgement.
func (b *Bus) ackError(m *keelevents.Message, err error) error {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		// Nobody received it: not stored. The stream may have been
		// deleted, or JetStream is still starting: ensure it again.
		first, _ := splitTopic(m.Topic)
		b.forgetStream(first)
		return fmt.Errorf("jetstream: publishing %s: no stream answered: %w", msgID(m), err)
	case errors.As(err, &apiErr):
		if apiErr.ErrorCode == jetstream.JSErrCodeStreamNotFound {
			first, _ := splitTopic(m.Topic)
			b.forgetStream(first)
		}
		return fmt.Errorf("jetstream: the server refused %s: %w", msgID(m), err)
	default:
		return fmt.Errorf("%w: publishing %s: %w", keelevents.ErrOutcomeUnknown, msgID(m), err)
	}
}

// headerSize approximates the wire size of NATS headers.
func headerSize(h nats.Header) int {
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}
