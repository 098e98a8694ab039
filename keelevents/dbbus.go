package keelevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelwork/keel/keelsql"
)

// DatabaseBus is the bus for a single database without a broker. A message
// is a row unique by (topic, id), which absorbs republishes; publishing
// fans it out, in the same transaction, to one delivery row per durable
// consumer whose topics match. Subscribers claim due deliveries under a
// lease (the ack wait) and delete them on acknowledgement, fenced by the
// attempt number; an ordered consumer only ever claims the oldest delivery
// of each partition, so a redelivery holds the partition back. While a
// handler runs its lease is extended every third of the ack wait: only a
// process that died (or lost the database) has its deliveries redelivered.
//
// The table is the queue: any number of processes may subscribe with the
// same consumer (FOR UPDATE SKIP LOCKED on PostgreSQL; SQLite has one
// writer). A publish wakes the subscribers of this process at once; those
// of other processes find new deliveries by short adaptive polling, and a
// subscriber idle for MaxPoll leaves the polling to the bus's one probe,
// which asks for all the idle consumers of the process in one statement.
type DatabaseBus[TTx any] struct {
	db  keelsql.DB[TTx]
	d   dialect
	cfg DatabaseBusConfig

	mu      sync.Mutex
	subs    map[*dbSubscriber[TTx]]struct{}
	closed  bool
	logger  *slog.Logger
	ownerID string
	// probeStop ends the probe loop (probeParked), started with the first
	// subscriber; probeDone closes when it has ended.
	probeStop context.CancelFunc
	probeDone chan struct{}
}

// DatabaseBusConfig configures a DatabaseBus; the zero value is usable.
type DatabaseBusConfig struct {
	// MaxInFlight bounds one subscriber's concurrent handler calls
	// (default 32).
	MaxInFlight int
	// MinPoll and MaxPoll bound the idle polling interval, which doubles
	// from MinPoll while nothing is due (defaults 2ms and 100ms).
	MinPoll, MaxPoll time.Duration
	// Retention keeps acknowledged messages this long, the window in which
	// a republish of the same topic and id is absorbed (default 7 days).
	Retention time.Duration
	// Logger receives errors of the delivery loops (default slog.Default()).
	Logger *slog.Logger
}

// Defaults of DatabaseBusConfig.
const (
	DefaultMaxInFlight  = 32
	DefaultBusMinPoll   = 2 * time.Millisecond
	DefaultBusMaxPoll   = 100 * time.Millisecond
	DefaultBusRetention = 7 * 24 * time.Hour
)

// NewDatabaseBus returns the in-database bus on db, whose events line must
// be migrated.
func NewDatabaseBus[TTx any](db keelsql.DB[TTx], cfg *DatabaseBusConfig) (*DatabaseBus[TTx], error) {
	d, err := newDialect(db.Dialect())
	if err != nil {
		return nil, err
	}
	c := DatabaseBusConfig{}
	if cfg != nil {
		c = *cfg
	}
	if c.MaxInFlight < 0 || c.MinPoll < 0 || c.MaxPoll < 0 || c.Retention < 0 {
		return nil, invalid("DatabaseBusConfig: negative value")
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MinPoll == 0 {
		c.MinPoll = DefaultBusMinPoll
	}
	if c.MaxPoll == 0 {
		c.MaxPoll = DefaultBusMaxPoll
	}
	if c.MaxPoll < c.MinPoll {
		c.MaxPoll = c.MinPoll
	}
	if c.Retention == 0 {
		c.Retention = DefaultBusRetention
	}
	logger := c.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &DatabaseBus[TTx]{db: db, d: d, cfg: c, subs: map[*dbSubscriber[TTx]]struct{}{},
		logger: logger, ownerID: instanceID()}, nil
}

// Name implements Bus.
func (b *DatabaseBus[TTx]) Name() string { return "database" }

type busConsumer struct {
	name   string
	topics []string
}

// Publish implements Bus: all of msgs in one transaction, so it
// acknowledges all or none.
func (b *DatabaseBus[TTx]) Publish(ctx context.Context, msgs []Message) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	for i := range msgs {
		if err := ValidateTopic(msgs[i].Topic); err != nil {
			return 0, err
		}
		if err := ValidateID(msgs[i].ID); err != nil {
			return 0, err
		}
	}
	if b.d.pg {
		return b.publishPG(ctx, msgs)
	}
	woken := map[string]bool{}
	err := b.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		clear(woken)
		rows, err := tx.Query(ctx, b.d.sql("BusConsumers"))
		consumers, err := keelsql.CollectRows(rows, err, scanBusConsumer)
		if err != nil {
			return fmt.Errorf("reading consumers: %w", err)
		}
		at := now()
		for i := range msgs {
			m := &msgs[i]
			var seq int64
			err := tx.QueryRow(ctx, b.d.sql("BusMessageInsert"), m.Topic, m.ID, m.Key, m.Type, m.Partition,
				string(m.Payload), encodeHeaders(m.Headers), m.Digest, m.EmittedAt.UTC(), at).Scan(&seq)
			if errors.Is(err, keelsql.ErrNoRows) {
				continue // a republish: already stored and fanned out
			}
			if err != nil {
				return fmt.Errorf("storing %s/%s: %w", m.Topic, m.ID, err)
			}
			for _, c := range consumers {
				if !matchAny(c.topics, m.Topic) {
					continue
				}
				if _, err := tx.Exec(ctx, b.d.sql("BusDeliveryInsert"), c.name, seq, m.Partition, at); err != nil {
					return fmt.Errorf("queueing %s/%s for %s: %w", m.Topic, m.ID, c.name, err)
				}
				woken[c.name] = true
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("publishing %d messages: %w", len(msgs), err)
	}
	b.wake(woken)
	return len(msgs), nil
}

// publishPG publishes msgs in one statement (one round trip, atomic).
func (b *DatabaseBus[TTx]) publishPG(ctx context.Context, msgs []Message) (int, error) {
	n := len(msgs)
	topics, ids, keys, types := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	payloads, headers, digests := make([]string, n), make([]string, n), make([]string, n)
	parts := make([]int32, n)
	emitted := make([]time.Time, n)
	for i, m := range msgs {
		topics[i], ids[i], keys[i], types[i] = m.Topic, m.ID, m.Key, m.Type
		payloads[i], headers[i], digests[i] = string(m.Payload), encodeHeaders(m.Headers), m.Digest
		parts[i], emitted[i] = int32(m.Partition), m.EmittedAt.UTC()
	}
	rows, err := b.db.Query(ctx, b.d.sql("BusPublish"), topics, ids, keys, types, parts, payloads, headers, digests, emitted, now())
	names, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (string, error) {
		var s string
		return s, r.Scan(&s)
	})
	if err != nil {
		return 0, fmt.Errorf("publishing %d messages: %w", n, err)
	}
	woken := map[string]bool{}
	for _, c := range names {
		woken[c] = true
	}
	b.wake(woken)
	return n, nil
}

func scanBusConsumer(r keelsql.Rows) (busConsumer, error) {
	var c busConsumer
	var topics string
	if err := r.Scan(&c.name, &topics); err != nil {
		return c, err
	}
	return c, json.Unmarshal([]byte(topics), &c.topics)
}

func matchAny(patterns []string, topic string) bool {
	for _, p := range patterns {
		if MatchTopic(p, topic) {
			return true
		}
	}
	return false
}

// wake tells this process's subscribers of the named consumers that
// deliveries are due.
func (b *DatabaseBus[TTx]) wake(names map[string]bool) {
	if len(names) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		if names[s.sub.Consumer] {
			s.poke()
		}
	}
}

// Subscribe implements Bus. The consumer is created (or its topics
// updated) before Subscribe returns: what is published afterwards reaches
// it.
func (b *DatabaseBus[TTx]) Subscribe(ctx context.Context, sub Subscription, h Handler) (Subscriber, error) {
	sub.Topics = append([]string(nil), sub.Topics...)
	if err := validateSubscription(&sub); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, invalid("consumer %s: nil handler", sub.Consumer)
	}
	topics, _ := json.Marshal(sub.Topics)
	if _, err := b.db.Exec(ctx, b.d.sql("BusConsumerUpsert"), sub.Consumer, string(topics), now()); err != nil {
		return nil, fmt.Errorf("creating consumer %s: %w", sub.Consumer, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("keelevents: bus closed")
	}
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &dbSubscriber[TTx]{
		b: b, sub: sub, h: h,
		owner:   b.ownerID + "/" + sub.Consumer,
		wakeC:   make(chan struct{}, 1),
		probed:  make(chan struct{}, 1),
		cancel:  cancel,
		done:    make(chan struct{}),
		handCtx: ctx,
		slots:   make(chan struct{}, max(b.cfg.MaxInFlight, sub.InFlight)),
	}
	b.subs[s] = struct{}{}
	if b.probeStop == nil {
		probeCtx, stop := context.WithCancel(context.Background())
		b.probeStop, b.probeDone = stop, make(chan struct{})
		go b.probeLoop(probeCtx)
	}
	go s.run(loopCtx, ctx)
	return s, nil
}

// probeLoop runs probeParked every MaxPoll until ctx ends.
func (b *DatabaseBus[TTx]) probeLoop(ctx context.Context) {
	defer close(b.probeDone)
	t := time.NewTicker(b.cfg.MaxPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.probeParked(ctx)
		}
	}
}

// probeParked asks, in one statement, which consumers of the parked
// subscribers have a delivery due, and wakes those subscribers. Each idle
// subscriber used to run its claim every MaxPoll: an idle server with
// eight consumers ran 80 claims a second to find nothing. The probe keeps
// the bound, a delivery published by another process (or due again after
// a backoff or an expired lease) is claimed within MaxPoll, at one
// statement per MaxPoll for the whole process.
func (b *DatabaseBus[TTx]) probeParked(ctx context.Context) {
	b.mu.Lock()
	var parked []*dbSubscriber[TTx]
	var names []string
	for s := range b.subs {
		if s.parked.Load() {
			parked = append(parked, s)
			if !slices.Contains(names, s.sub.Consumer) {
				names = append(names, s.sub.Consumer)
			}
		}
	}
	b.mu.Unlock()
	if len(names) == 0 {
		return
	}
	rows, err := b.db.Query(ctx, b.d.sql("BusDue"), b.d.strings(names), now())
	due, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (string, error) {
		var name string
		return name, r.Scan(&name)
	})
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		b.logger.Warn("keelevents: bus probe", "err", err)
		due = names // unknown: every parked subscriber looks for itself
	}
	for _, s := range parked {
		if slices.Contains(due, s.sub.Consumer) {
			poke(s.probed)
		}
	}
}

// Close implements Bus: it stops every subscriber, letting in-flight
// handler calls finish.
func (b *DatabaseBus[TTx]) Close() error {
	b.mu.Lock()
	b.closed = true
	subs := make([]*dbSubscriber[TTx], 0, len(b.subs))
	for s := range b.subs {
		subs = append(subs, s)
	}
	stop, done := b.probeStop, b.probeDone
	b.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultAckWait)
	defer cancel()
	var errs []error
	for _, s := range subs {
		errs = append(errs, s.Stop(ctx))
	}
	return errors.Join(errs...)
}

// Prune deletes acknowledged messages older than the retention, in
// batches of at most limit, and returns how many it deleted.
func (b *DatabaseBus[TTx]) Prune(ctx context.Context, limit int) (int64, error) {
	n, err := b.db.Exec(ctx, b.d.sql("BusPrune"), now().Add(-b.cfg.Retention), limit)
	if err != nil {
		return 0, fmt.Errorf("pruning bus messages: %w", err)
	}
	return n, nil
}

// dbSubscriber is one Subscribe call's delivery loop.
type dbSubscriber[TTx any] struct {
	b     *DatabaseBus[TTx]
	sub   Subscription
	h     Handler
	owner string
	wakeC chan struct{}
	// probed is the bus probe's wake; parked says the loop waits for a
	// wake or a probe only (see run).
	probed  chan struct{}
	parked  atomic.Bool
	cancel  context.CancelFunc
	done    chan struct{}
	handCtx context.Context // handlers' context: the one given to Subscribe
	slots   chan struct{}   // one per handler call in flight
	// ackMu guards the acknowledgements waiting for a statement (see ack).
	ackMu  sync.Mutex
	acks   []ackReq
	acking bool
	wg     sync.WaitGroup
	stop   sync.Once
}

func (s *dbSubscriber[TTx]) poke() {
	select {
	case s.wakeC <- struct{}{}:
	default:
	}
}

func (s *dbSubscriber[TTx]) run(ctx, parent context.Context) {
	defer close(s.done)
	go func() {
		select {
		case <-parent.Done():
			s.cancel()
		case <-ctx.Done():
		}
	}()
	poll := s.b.cfg.MinPoll
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		default:
		}
		n, err := s.claim(ctx)
		if err != nil && ctx.Err() == nil {
			s.b.logger.Error("keelevents: claiming deliveries", "consumer", s.sub.Consumer, "err", err)
			poll = s.b.cfg.MaxPoll
		}
		if n > 0 {
			poll = s.b.cfg.MinPoll
		}
		if n == 0 && err == nil && poll >= s.b.cfg.MaxPoll && len(s.slots) < cap(s.slots) {
			// Idle at MaxPoll: park. A publish of this process or a
			// finished handler wakes the loop as before; deliveries from
			// elsewhere are found by the bus's probe, which wakes only
			// the consumers that have some due. A wake that finds
			// nothing (another process claimed them, or the finished
			// handler's partition has nothing next) parks again; one
			// that finds deliveries polls from MinPoll, as after any
			// claim that found some.
			s.parked.Store(true)
			select {
			case <-ctx.Done():
			case <-s.wakeC:
			case <-s.probed:
			}
			s.parked.Store(false)
			continue
		}
		if len(s.slots) == cap(s.slots) || n == 0 || err != nil {
			timer.Reset(poll)
			select {
			case <-ctx.Done():
				return
			case <-s.wakeC:
				poll = s.b.cfg.MaxPoll
			case <-s.probed:
				poll = s.b.cfg.MaxPoll
			case <-timer.C:
				if n == 0 {
					poll = min(2*poll, s.b.cfg.MaxPoll)
				}
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
	}
}

type claimed struct {
	seq     int64
	attempt int
}

// claim leases as many due deliveries as there are free handler slots and
// starts their handlers.
func (s *dbSubscriber[TTx]) claim(ctx context.Context) (int, error) {
	free := cap(s.slots) - len(s.slots)
	if free == 0 {
		return 0, nil
	}
	name := "BusClaim"
	if s.sub.Ordered {
		name = "BusClaimOrdered"
	}
	at := now()
	if s.b.d.pg {
		return s.claimPG(ctx, name+"Fetch", at, free)
	}
	rows, err := s.b.db.Query(ctx, s.b.d.sql(name), s.sub.Consumer, at, at.Add(s.sub.AckWait), s.owner, free)
	got, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (claimed, error) {
		var c claimed
		return c, r.Scan(&c.seq, &c.attempt)
	})
	if err != nil || len(got) == 0 {
		return 0, err
	}
	seqs := make([]int64, len(got))
	attempts := make(map[int64]int, len(got))
	for i, c := range got {
		seqs[i] = c.seq
		attempts[c.seq] = c.attempt
	}
	rows, err = s.b.db.Query(ctx, s.b.d.sql("BusMessages"), s.b.d.int64s(seqs))
	msgs, err := keelsql.CollectRows(rows, err, scanMessageSeq)
	if err != nil {
		return 0, fmt.Errorf("reading claimed messages: %w", err)
	}
	for _, m := range msgs {
		s.slots <- struct{}{}
		s.wg.Add(1)
		go s.deliver(m.seq, &Delivery{Message: m.Message, Attempt: attempts[m.seq]})
	}
	return len(msgs), nil
}

func (s *dbSubscriber[TTx]) claimPG(ctx context.Context, name string, at time.Time, free int) (int, error) {
	rows, err := s.b.db.Query(ctx, s.b.d.sql(name), s.sub.Consumer, at, at.Add(s.sub.AckWait), s.owner, free)
	type claimedMsg struct {
		seqMessage
		attempt int
	}
	msgs, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (claimedMsg, error) {
		var m claimedMsg
		var payload, headers string
		err := r.Scan(&m.seq, &m.Topic, &m.ID, &m.Key, &m.Type, &m.Partition, &payload, &headers, &m.Digest, &m.EmittedAt, &m.attempt)
		if err != nil {
			return m, err
		}
		m.Payload, m.EmittedAt = []byte(payload), m.EmittedAt.UTC()
		m.Headers, err = decodeHeaders(headers)
		return m, err
	})
	if err != nil {
		return 0, fmt.Errorf("claiming deliveries: %w", err)
	}
	for _, m := range msgs {
		s.slots <- struct{}{}
		s.wg.Add(1)
		go s.deliver(m.seq, &Delivery{Message: m.Message, Attempt: m.attempt})
	}
	return len(msgs), nil
}

type seqMessage struct {
	seq int64
	Message
}

func scanMessageSeq(r keelsql.Rows) (seqMessage, error) {
	var m seqMessage
	var payload, headers string
	if err := r.Scan(&m.seq, &m.Topic, &m.ID, &m.Key, &m.Type, &m.Partition, &payload, &headers, &m.Digest, &m.EmittedAt); err != nil {
		return m, err
	}
	m.Payload = []byte(payload)
	m.EmittedAt = m.EmittedAt.UTC()
	var err error
	m.Headers, err = decodeHeaders(headers)
	return m, err
}

// deliver calls the handler and acknowledges or schedules the redelivery.
// The acknowledgement does not depend on the loop's context: a handler
// that finished while the subscriber stops still gets its ack written.
func (s *dbSubscriber[TTx]) deliver(seq int64, d *Delivery) {
	defer func() {
		<-s.slots
		s.wg.Done()
		s.poke()
	}()
	stopExtend := s.extend(seq, d.Attempt)
	err := s.call(d)
	stopExtend()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.handCtx), 30*time.Second)
	defer cancel()
	if err == nil {
		if err = s.ack(ctx, seq, d.Attempt); err != nil {
			s.b.logger.Error("keelevents: acknowledging", "consumer", s.sub.Consumer, "topic", d.Topic, "id", d.ID, "err", err)
		}
		return
	}
	at := now().Add(BackoffFor(s.sub.Backoff, d.Attempt))
	if _, err := s.b.db.Exec(ctx, s.b.d.sql("BusNack"), s.sub.Consumer, seq, d.Attempt, at); err != nil {
		s.b.logger.Error("keelevents: scheduling a redelivery", "consumer", s.sub.Consumer, "topic", d.Topic, "id", d.ID, "err", err)
	}
}

// ackReq is one acknowledgement waiting for its statement.
type ackReq struct {
	seq     int64
	attempt int
	done    chan error
}

// ack acknowledges a delivery and returns once that is written. On
// PostgreSQL acknowledgements are grouped: the first caller to find no
// statement running leads, and writes every acknowledgement queued until
// the queue is empty, one BusAckMany each time; the others wait for
// theirs. A lone delivery pays one statement as before; deliveries
// finishing together (a batching consumer's batch) share one.
func (s *dbSubscriber[TTx]) ack(ctx context.Context, seq int64, attempt int) error {
	if !s.b.d.pg {
		_, err := s.b.db.Exec(ctx, s.b.d.sql("BusAck"), s.sub.Consumer, seq, attempt)
		return err
	}
	r := ackReq{seq: seq, attempt: attempt, done: make(chan error, 1)}
	s.ackMu.Lock()
	s.acks = append(s.acks, r)
	lead := !s.acking
	s.acking = true
	s.ackMu.Unlock()
	if lead {
		for {
			s.ackMu.Lock()
			batch := s.acks
			s.acks = nil
			if len(batch) == 0 {
				s.acking = false
				s.ackMu.Unlock()
				break
			}
			s.ackMu.Unlock()
			// A delivery redelivered while its stale holder still acks is
			// there twice: only the latest attempt can match its row.
			latest := make(map[int64]int, len(batch))
			for _, a := range batch {
				if at, ok := latest[a.seq]; !ok || a.attempt > at {
					latest[a.seq] = a.attempt
				}
			}
			seqs, attempts := make([]int64, 0, len(latest)), make([]int, 0, len(latest))
			for seq, at := range latest {
				seqs, attempts = append(seqs, seq), append(attempts, at)
			}
			_, err := s.b.db.Exec(ctx, s.b.d.sql("BusAckMany"), s.sub.Consumer, s.b.d.int64s(seqs), s.b.d.ints(attempts))
			for _, a := range batch {
				a.done <- err
			}
		}
	}
	return <-r.done
}

// extend keeps the delivery leased while its handler runs longer than a
// third of the ack wait, so a slow handler is not redelivered (and, for an
// ordered consumer, its partition not handed on) while it still works. A
// process that dies stops extending: its deliveries come back after the
// ack wait.
func (s *dbSubscriber[TTx]) extend(seq int64, attempt int) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(s.sub.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.WithoutCancel(s.handCtx), s.sub.AckWait/3)
				_, err := s.b.db.Exec(ctx, s.b.d.sql("BusExtend"), s.sub.Consumer, seq, attempt, now().Add(s.sub.AckWait))
				cancel()
				if err != nil {
					s.b.logger.Warn("keelevents: extending a delivery's lease", "consumer", s.sub.Consumer, "err", err)
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

func (s *dbSubscriber[TTx]) call(d *Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("keelevents: handler panicked: %v", r)
		}
	}()
	return s.h(s.handCtx, d)
}

// Stop implements Subscriber.
func (s *dbSubscriber[TTx]) Stop(ctx context.Context) error {
	s.stop.Do(func() {
		s.cancel()
		s.b.mu.Lock()
		delete(s.b.subs, s)
		s.b.mu.Unlock()
	})
	select {
	case <-s.done:
	case <-ctx.Done():
		return fmt.Errorf("stopping consumer %s: %w", s.sub.Consumer, ctx.Err())
	}
	finished := make(chan struct{})
	go func() { s.wg.Wait(); close(finished) }()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stopping consumer %s: handlers still running: %w", s.sub.Consumer, ctx.Err())
	}
}
