package keelevents

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
)

// Config configures Events; the zero value is usable.
type Config struct {
	// Partitions is the number of partitions of the key space (default
	// DefaultPartitions). It is fixed per database at the first start: a
	// different value later is an error, since moving keys between
	// partitions would break per-key order.
	Partitions int
	// RelayBatch bounds the events one relay publish carries (default
	// DefaultRelayBatch).
	RelayBatch int
	// RelayLanes is how many publish loops a relay runs over its
	// partitions, partition p in lane p mod RelayLanes (default
	// DefaultRelayLanes; at most Partitions are busy). Each lane has one
	// batch in flight, so lanes overlap one batch's database round trips
	// with another's publish; per-key order holds since a partition stays
	// in one lane.
	RelayLanes int
	// LeaseTTL is how long a relay holds a partition without renewing it;
	// a dead relay's partitions move after it (default DefaultLeaseTTL).
	LeaseTTL time.Duration
	// PublishTimeout bounds one publish (default DefaultPublishTimeout);
	// past it the outcome is unknown and the same ids are republished.
	PublishTimeout time.Duration
	// Retention keeps published events, payload and all, at least this
	// long before they are archived to a summary (default
	// DefaultRetention). Keep it at least as long as consumers may replay.
	Retention time.Duration
	// MinPoll and MaxPoll bound the relay's idle polling, which doubles
	// from MinPoll while nothing is pending (defaults 1ms and 100ms). An
	// EmitTx in this process wakes the relay at once.
	MinPoll, MaxPoll time.Duration
	// StatsInterval is how often the gauges are refreshed from the
	// database (default DefaultStatsInterval).
	StatsInterval time.Duration
	// DisableRelay runs no relay in this process (consumers only).
	DisableRelay bool
	// Queue is the engine queue of the archive job (default keel.DefaultQueue).
	Queue string
	// Registerer receives the metrics (nil: not registered).
	Registerer prometheus.Registerer
	// Logger for background errors (default slog.Default()).
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultPartitions     = 16
	DefaultRelayBatch     = 500
	DefaultRelayLanes     = 4
	DefaultLeaseTTL       = 15 * time.Second
	DefaultPublishTimeout = 5 * time.Second
	DefaultRetention      = 7 * 24 * time.Hour
	DefaultMinPoll        = time.Millisecond
	DefaultMaxPoll        = 100 * time.Millisecond
	DefaultStatsInterval  = 5 * time.Second
	DefaultMaxAttempts    = 10
	archiveBatch          = 1000
)

func (c *Config) withDefaults() (Config, error) {
	out := Config{}
	if c != nil {
		out = *c
	}
	for name, v := range map[string]int64{"Partitions": int64(out.Partitions), "RelayBatch": int64(out.RelayBatch),
		"RelayLanes": int64(out.RelayLanes),
		"LeaseTTL":   int64(out.LeaseTTL), "PublishTimeout": int64(out.PublishTimeout), "Retention": int64(out.Retention),
		"MinPoll": int64(out.MinPoll), "MaxPoll": int64(out.MaxPoll), "StatsInterval": int64(out.StatsInterval)} {
		if v < 0 {
			return out, invalid("Config.%s is negative", name)
		}
	}
	if out.Partitions > 4096 {
		return out, invalid("Config.Partitions is %d; at most 4096", out.Partitions)
	}
	if out.RelayBatch > 10000 {
		return out, invalid("Config.RelayBatch is %d; at most 10000", out.RelayBatch)
	}
	out.RelayBatch = cmp.Or(out.RelayBatch, DefaultRelayBatch)
	if out.RelayLanes > 64 {
		return out, invalid("Config.RelayLanes is %d; at most 64", out.RelayLanes)
	}
	out.RelayLanes = cmp.Or(out.RelayLanes, DefaultRelayLanes)
	out.LeaseTTL = cmp.Or(out.LeaseTTL, DefaultLeaseTTL)
	out.PublishTimeout = cmp.Or(out.PublishTimeout, DefaultPublishTimeout)
	out.Retention = cmp.Or(out.Retention, DefaultRetention)
	out.MinPoll = cmp.Or(out.MinPoll, DefaultMinPoll)
	out.MaxPoll = max(cmp.Or(out.MaxPoll, DefaultMaxPoll), out.MinPoll)
	out.StatsInterval = cmp.Or(out.StatsInterval, DefaultStatsInterval)
	out.Queue = cmp.Or(out.Queue, keel.DefaultQueue)
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	return out, nil
}

// Events is the events backbone on one database: outbox, relay and inbox.
type Events[TTx any] struct {
	db  keelsql.DB[TTx]
	bus Bus
	d   dialect
	cfg Config
	m   *metrics

	partsMu sync.Mutex
	parts   int    // 0 until read from (or written to) the database
	channel string // PostgreSQL: the channel EmitTx notifies

	mu        sync.Mutex
	consumers map[string]*consumer[TTx]
	started   bool
	client    *keel.Client[TTx]
	subs      []Subscriber
	cancel    context.CancelFunc
	done      []chan struct{}

	// relayWake is EmitTx's wake, sent before its transaction commits:
	// lanes poll briefly from MinPoll until the commit shows. relayLook
	// is a wake after a commit (a notification): lanes look once.
	relayWake chan struct{}
	relayLook chan struct{}
	listening atomic.Bool // the outbox listener is connected
}

// New returns the events backbone on db publishing to bus. The events line
// (Line) must be migrated.
func New[TTx any](db keelsql.DB[TTx], bus Bus, cfg *Config) (*Events[TTx], error) {
	if db == nil || bus == nil {
		return nil, invalid("New needs a database and a bus")
	}
	d, err := newDialect(db.Dialect())
	if err != nil {
		return nil, err
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(c.Registerer)
	if err != nil {
		return nil, err
	}
	return &Events[TTx]{db: db, bus: bus, d: d, cfg: c, m: m, consumers: map[string]*consumer[TTx]{},
		relayWake: make(chan struct{}, 1), relayLook: make(chan struct{}, 1)}, nil
}

// Bus returns the bus the relay publishes to.
func (e *Events[TTx]) Bus() Bus { return e.bus }

// partitions returns the partition count fixed in the database, fixing it
// on first use; q is the caller's transaction or the database.
func (e *Events[TTx]) partitions(ctx context.Context, q keelsql.Querier) (int, error) {
	// The lock guards the cached values only, never a query: on SQLite a
	// caller's transaction holds the one writer connection while it emits,
	// so a query made under this lock by another goroutine (waiting for
	// that connection) would block the emitter on the lock for ever.
	e.partsMu.Lock()
	cached := e.parts
	e.partsMu.Unlock()
	if cached > 0 {
		return cached, nil
	}
	var n int
	initialized := false
	err := q.QueryRow(ctx, e.d.sql("MetaGet")).Scan(&n)
	if errors.Is(err, keelsql.ErrNoRows) {
		if _, err := q.Exec(ctx, e.d.sql("MetaInit"), cmp.Or(e.cfg.Partitions, DefaultPartitions)); err != nil {
			return 0, fmt.Errorf("fixing the partition count: %w", err)
		}
		initialized = true
		err = q.QueryRow(ctx, e.d.sql("MetaGet")).Scan(&n)
	}
	if err != nil {
		return 0, fmt.Errorf("reading the partition count: %w", err)
	}
	if e.cfg.Partitions != 0 && e.cfg.Partitions != n {
		return 0, fmt.Errorf("%w: Config.Partitions is %d but this database was set up with %d partitions", ErrInvalid, e.cfg.Partitions, n)
	}
	if e.d.pg {
		var ns string
		if err := q.QueryRow(ctx, e.d.sql("CurrentSchema")).Scan(&ns); err != nil {
			return 0, fmt.Errorf("reading the schema: %w", err)
		}
		e.partsMu.Lock()
		e.channel = notifyChannel(ns, outboxTopic)
		e.partsMu.Unlock()
	}
	if initialized {
		// Written in q, which may be a caller's transaction that rolls
		// back: read it again next time rather than trust it.
		return n, nil
	}
	e.partsMu.Lock()
	e.parts = n
	e.partsMu.Unlock()
	return n, nil
}

// notifyChannel is the channel EmitTx notifies (PostgreSQL). partitions
// sets it, and may set it again while another goroutine emits (a relay's
// rebalance reads the partition count through it too): read it under the
// lock that writes it.
func (e *Events[TTx]) notifyChannel() string {
	e.partsMu.Lock()
	defer e.partsMu.Unlock()
	return e.channel
}

// Digest is the digest the outbox records for a payload: hex SHA-256.
func Digest(payload []byte) string {
	sum := sha256.Sum256(payload)
	return hex.EncodeToString(sum[:])
}

// EmitTx writes ev to the outbox in the caller's transaction: it is
// published once tx commits, and never if it rolls back. The payload is
// stored compacted (insignificant JSON whitespace removed). Emitting an id
// already emitted on the topic is a no-op with the same payload and
// ErrConflict with another; bad input is ErrInvalid, with nothing written.
func (e *Events[TTx]) EmitTx(ctx context.Context, tx keelsql.Tx[TTx], ev Event) error {
	if err := ValidateEvent(&ev); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, ev.Payload); err != nil {
		return invalid("payload: %v", err)
	}
	payload := buf.Bytes()
	parts, err := e.partitions(ctx, tx)
	if err != nil {
		return err
	}
	digest := Digest(payload)
	args := []any{ev.Topic, ev.ID, ev.Key, cmp.Or(ev.Type, ev.Topic),
		PartitionOf(ev.Key, parts), string(payload), encodeHeaders(ev.Headers), digest, now()}
	var n int64
	if e.d.pg {
		// The notification is delivered at commit: relays listening in any
		// process wake then.
		err = tx.QueryRow(ctx, e.d.sql("OutboxInsertNotify"), append(args, e.notifyChannel())...).Scan(&n)
	} else {
		n, err = tx.Exec(ctx, e.d.sql("OutboxInsert"), args...)
	}
	if err != nil {
		return fmt.Errorf("writing event %s/%s: %w", ev.Topic, ev.ID, err)
	}
	if n == 1 {
		e.m.emitted.Inc()
		if !e.listening.Load() {
			// Without a listener (SQLite, or no engine client given to
			// Start) wake this process's relay, which polls briefly until
			// the commit.
			e.kickRelay()
		}
		return nil
	}
	var existing string
	if err := tx.QueryRow(ctx, e.d.sql("OutboxDigest"), ev.Topic, ev.ID).Scan(&existing); err != nil {
		return fmt.Errorf("reading event %s/%s: %w", ev.Topic, ev.ID, err)
	}
	if existing != digest {
		e.m.conflicts.Inc()
		return fmt.Errorf("%w: %s/%s", ErrConflict, ev.Topic, ev.ID)
	}
	return nil
}

// Emit is EmitTx in a transaction of its own.
func (e *Events[TTx]) Emit(ctx context.Context, ev Event) error {
	return e.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error { return e.EmitTx(ctx, tx, ev) })
}

func (e *Events[TTx]) kickRelay() {
	select {
	case e.relayWake <- struct{}{}:
	default:
	}
}

// lookRelay wakes the relay for what has committed (a notification).
func (e *Events[TTx]) lookRelay() {
	select {
	case e.relayLook <- struct{}{}:
	default:
	}
}

// ArchiveArgs is the periodic job that archives published events past the
// retention horizon and prunes the in-database bus.
type ArchiveArgs struct{}

// Kind implements keel.JobArgs.
func (ArchiveArgs) Kind() string { return "keel.events.archive" }

// Configure registers the archive job (hourly, once per tick across
// instances) with the engine.
func (e *Events[TTx]) Configure(cfg *keel.Config) error {
	if cfg.Workers == nil {
		cfg.Workers = keel.NewWorkers()
	}
	if cfg.Queues == nil {
		cfg.Queues = map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: keel.DefaultMaxWorkers}}
	}
	if _, ok := cfg.Queues[e.cfg.Queue]; !ok {
		cfg.Queues[e.cfg.Queue] = keel.QueueConfig{MaxWorkers: 1}
	}
	err := keel.AddWorkerSafely[ArchiveArgs](cfg.Workers, keel.WorkerFunc[ArchiveArgs](func(ctx context.Context, _ *keel.Job[ArchiveArgs]) error {
		return e.Archive(ctx)
	}))
	if err != nil {
		return fmt.Errorf("keelevents: %w", err)
	}
	queue := e.cfg.Queue
	cfg.PeriodicJobs = append(cfg.PeriodicJobs, &keel.PeriodicJob{
		Name: "keel.events.archive", Schedule: keel.Every(time.Hour),
		Construct: func(time.Time) (keel.JobArgs, *keel.InsertOpts) {
			return ArchiveArgs{}, &keel.InsertOpts{Queue: queue, MaxAttempts: 3}
		},
	})
	return nil
}

// Archive moves published events older than the retention to the archive
// (id, key, type, digest and times: what reconciliation reads), in bounded
// batches, and prunes the in-database bus if that is the bus.
func (e *Events[TTx]) Archive(ctx context.Context) error {
	before := now().Add(-e.cfg.Retention)
	for {
		var moved int64
		err := e.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
			n, err := tx.Exec(ctx, e.d.sql("OutboxArchive"), before, now(), archiveBatch)
			if err != nil {
				return err
			}
			moved = n
			_, err = tx.Exec(ctx, e.d.sql("OutboxArchived"), before)
			return err
		})
		if err != nil {
			return fmt.Errorf("archiving published events: %w", err)
		}
		e.m.archived.Add(float64(moved))
		if moved < archiveBatch {
			break
		}
	}
	if p, ok := e.bus.(interface {
		Prune(ctx context.Context, limit int) (int64, error)
	}); ok {
		for {
			n, err := p.Prune(ctx, archiveBatch)
			if err != nil {
				return err
			}
			if n < archiveBatch {
				break
			}
		}
	}
	return nil
}
