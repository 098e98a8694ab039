package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/keelwork/keel/keelevents"
)

// Subscribe creates (or updates) the subscription's durable JetStream
// consumers and starts pulling.
//
// Unordered: one consumer per topic filter, up to Config.Concurrency
// handler calls at a time, MaxAckPending shared by every instance.
//
// Ordered: one consumer per topic filter and partition, filtered on that
// partition's subject, with MaxAckPending 1. The server then hands out the
// next message of a partition only when the previous one is acknowledged,
// whichever instance holds it, and a failed message (negatively
// acknowledged with a delay, so it stays pending) holds back the rest of
// its partition until it succeeds. Deliveries of one partition through
// different topic filters of a subscription never overlap either, but
// messages of different filters carry no common order.
//
// A consumer is created with DeliverPolicy New: it receives what is
// published after it first exists. Switching a subscription between
// ordered and unordered therefore starts new consumers from that moment.
func (b *Bus) Subscribe(ctx context.Context, sub keelevents.Subscription, h keelevents.Handler) (keelevents.Subscriber, error) {
	if !consumerRE.MatchString(sub.Consumer) {
		return nil, fmt.Errorf("jetstream: consumer name %q is not [a-z0-9_-]{1,64}", sub.Consumer)
	}
	if h == nil {
		return nil, errors.New("jetstream: a handler is required")
	}
	filters, err := normalizeFilters(sub.Topics)
	if err != nil {
		return nil, err
	}
	if sub.InFlight < 0 || sub.InFlight > keelevents.MaxInFlight {
		return nil, fmt.Errorf("jetstream: InFlight %d is not 0..%d", sub.InFlight, keelevents.MaxInFlight)
	}
	if sub.AckWait <= 0 {
		sub.AckWait = keelevents.DefaultAckWait
	}
	if len(sub.Backoff) == 0 {
		sub.Backoff = keelevents.DefaultBackoff
	}
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, errors.New("jetstream: subscribing on a closed bus")
	}

	s := &subscriber{b: b, sub: sub, h: h, done: make(chan struct{})}
	s.fetchCtx, s.stopFetch = context.WithCancel(ctx)
	s.hctx, s.cancelH = context.WithCancel(context.WithoutCancel(ctx))
	if s.windowSize = b.window(sub); s.windowSize > 0 {
		s.win = newWindower(s, b.cfg.Partitions)
	} else if sub.Ordered {
		s.lanes = make([]sync.Mutex, b.cfg.Partitions)
	} else {
		s.slots = make(chan struct{}, max(b.cfg.Concurrency, sub.InFlight))
	}

	for _, f := range filters {
		if err := b.ensureStream(ctx, f.first); err != nil {
			return nil, err
		}
		if sub.Ordered {
			for p := 0; p < b.cfg.Partitions; p++ {
				s.consumers = append(s.consumers, s.consumerConfig(f, p))
			}
		} else {
			s.consumers = append(s.consumers, s.consumerConfig(f, -1))
		}
	}
	// Create every consumer before pulling from any, so that "published
	// after the subscription first existed" holds for all of them.
	handles := make([]jetstream.Consumer, len(s.consumers))
	for i := range s.consumers {
		c := &s.consumers[i]
		if handles[i], err = s.ensureConsumer(ctx, c, false); err != nil {
			return nil, fmt.Errorf("creating or updating consumer %s on stream %s: %w", c.cfg.Durable, c.stream, err)
		}
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, errors.New("jetstream: subscribing on a closed bus")
	}
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	for i := range s.consumers {
		s.loops.Add(1)
		go s.pull(&s.consumers[i], handles[i])
	}
	if v := b.nc.ConnectedServerVersion(); serverRewinds(v) && b.cfg.HealEvery > 0 {
		s.loops.Add(1)
		go s.watch()
	}
	if s.win != nil {
		s.handlers.Add(1)
		go s.win.run()
		go func() {
			s.loops.Wait()
			s.win.pullsEnded()
		}()
	}
	go func() {
		// The subscription's context ending stops it, like Stop.
		select {
		case <-ctx.Done():
			_ = s.Stop(context.Background())
		case <-s.done:
		}
	}()
	return s, nil
}

type consumerSpec struct {
	stream    string
	first     string
	partition int // -1 unordered
	cfg       jetstream.ConsumerConfig
	// acked is, for an ordered consumer without a window, the highest
	// stream sequence this instance acknowledged: everything before it
	// was acknowledged too (one delivery in flight per partition), which
	// heal.go needs when the server lost the floor as well.
	acked atomic.Uint64
}

func (s *subscriber) consumerConfig(f filter, partition int) consumerSpec {
	cfg := jetstream.ConsumerConfig{
		Durable:       durableName(s.sub.Consumer, f, partition),
		Description:   "Keel consumer " + s.sub.Consumer + " of " + f.topic,
		DeliverPolicy: jetstream.DeliverNewPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.sub.AckWait,
		MaxDeliver:    -1,
		FilterSubject: s.b.names.filterSubject(f, partition),
		MaxAckPending: s.b.cfg.MaxAckPending,
		// Zero (never) unless configured: a durable keeps its place
		// however long its instances are away.
		InactiveThreshold: s.b.cfg.InactiveThreshold,
	}
	if s.b.cfg.MaxDeliver > 0 {
		cfg.MaxDeliver = s.b.cfg.MaxDeliver
	}
	if partition >= 0 && s.win != nil {
		cfg.MaxAckPending = s.windowSize
		cfg.PriorityPolicy = jetstream.PriorityPolicyPinned
		cfg.PriorityGroups = []string{pinGroup}
		cfg.PinnedTTL = pinnedTTL(s.sub.AckWait)
	} else if partition >= 0 {
		cfg.MaxAckPending = 1
	} else {
		cfg.MaxAckPending = max(cfg.MaxAckPending, s.sub.InFlight)
	}
	return consumerSpec{stream: s.b.names.streamName(f.first), first: f.first, partition: partition, cfg: cfg}
}

type subscriber struct {
	b   *Bus
	sub keelevents.Subscription
	h   keelevents.Handler

	consumers  []consumerSpec
	lanes      []sync.Mutex  // ordered: one per partition, across filters
	slots      chan struct{} // unordered: handler calls in flight
	win        *windower     // ordered with a window
	windowSize int

	fetchCtx  context.Context // ends the pulling
	stopFetch context.CancelFunc
	hctx      context.Context // given to handlers; cancelled when a stop gives up waiting
	cancelH   context.CancelFunc
	loops     sync.WaitGroup // pull loops and the handler calls they started
	handlers  sync.WaitGroup

	stopOnce sync.Once
	done     chan struct{}
	stopErr  error
}

// pull feeds one consumer's messages to the handler until the subscriber
// stops, recreating the consumer (and its stream) if the server lost it.
func (s *subscriber) pull(c *consumerSpec, cons jetstream.Consumer) {
	defer s.loops.Done()
	batch := 2 * cap(s.slots)
	if c.partition >= 0 {
		// The server sends one message at a time (MaxAckPending 1) however
		// many are asked for; what the size sets is how often the client
		// asks again (at half of it). A pull request is work for the server
		// on every partition's consumer: 64 rather than 8 drained a ledger
		// backlog 7-13% faster in alternating rounds (docs/benchmarks.md).
		batch = 64
		if s.win != nil {
			batch = max(batch, 2*s.windowSize)
		}
	}
	opts := []jetstream.PullMessagesOpt{jetstream.PullMaxMessages(batch), jetstream.PullHeartbeat(5 * time.Second)}
	if s.win != nil {
		opts = append(opts, jetstream.PullPriorityGroup(pinGroup), jetstream.PullExpiry(pullExpiry(s.sub.AckWait)))
	}
	wait := 100 * time.Millisecond
	for s.fetchCtx.Err() == nil {
		if cons == nil {
			var err error
			if err = s.b.ensureStream(s.fetchCtx, c.first); err == nil {
				cons, err = s.ensureConsumer(s.fetchCtx, c, true)
			}
			if err != nil {
				s.b.forgetStream(c.first)
				s.b.log.Warn("jetstream: consumer unavailable, retrying", "consumer", c.cfg.Durable, "error", err, "in", wait)
				if !sleepCtx(s.fetchCtx, wait) {
					return
				}
				wait = min(2*wait, 5*time.Second)
				continue
			}
		}
		it, err := cons.Messages(opts...)
		if err != nil {
			s.b.log.Warn("jetstream: pulling failed, retrying", "consumer", c.cfg.Durable, "error", err, "in", wait)
			cons = nil
			if !sleepCtx(s.fetchCtx, wait) {
				return
			}
			wait = min(2*wait, 5*time.Second)
			continue
		}
		wait = 100 * time.Millisecond
		for {
			m, err := it.Next(jetstream.NextContext(s.fetchCtx))
			if err != nil {
				if s.fetchCtx.Err() != nil {
					s.finish(it, c)
					return
				}
				// The iterator ended (consumer deleted, connection closed):
				// recreate the consumer and pull again.
				s.b.log.Warn("jetstream: pulling stopped, resuming", "consumer", c.cfg.Durable, "error", err)
				it.Stop()
				cons = nil
				break
			}
			s.dispatch(m, c)
		}
	}
}

// dispatch hands a message to the handler: to the windower's lane, inline
// on an ordered lane, else on one of the subscription's handler slots.
func (s *subscriber) dispatch(m jetstream.Msg, c *consumerSpec) {
	partition := c.partition
	if s.win != nil {
		s.win.add(m, partition, c.cfg.Durable)
		return
	}
	if partition >= 0 {
		if seq, ok := s.handle(m, partition); ok && seq > c.acked.Load() {
			c.acked.Store(seq) // one pull loop per consumer: no race between stores
		}
		return
	}
	s.slots <- struct{}{}
	s.handlers.Add(1)
	go func() {
		defer func() { <-s.slots; s.handlers.Done() }()
		s.handle(m, -1)
	}()
}

// finish, on stop, drains what the client already received and handles
// it like the calls in flight: those messages are this instance's
// already, and handing them back (a negative acknowledgement) was measured
// to make a 2.9 server deliver one of them twice and lose another when the
// next subscriber of the durable pulls. Only once Stop gives up waiting
// are the rest handed back.
func (s *subscriber) finish(it jetstream.MessagesContext, c *consumerSpec) {
	it.Drain()
	for {
		m, err := it.Next(jetstream.NextMaxWait(2 * time.Second))
		if err != nil {
			return
		}
		if s.hctx.Err() != nil {
			_ = m.Nak()
			continue
		}
		s.dispatch(m, c)
	}
}

// handle runs the handler on one message and acknowledges it, or asks for
// a redelivery after the subscription's backoff. While the handler runs,
// the message's AckWait is extended so that a slow handler is not raced
// by a redelivery.
func (s *subscriber) handle(m jetstream.Msg, lane int) (seq uint64, acked bool) {
	d, ok := s.delivery(m)
	if !ok {
		return 0, false
	}
	if lane < 0 && s.lanes != nil {
		lane = d.Partition
	}
	if s.lanes != nil && lane >= 0 && lane < len(s.lanes) {
		s.lanes[lane].Lock()
		defer s.lanes[lane].Unlock()
	}
	working := make(chan struct{})
	go func() {
		t := time.NewTicker(s.sub.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = m.InProgress()
			case <-working:
				return
			}
		}
	}()
	herr := s.call(d)
	close(working)
	if herr != nil {
		_ = m.NakWithDelay(keelevents.BackoffFor(s.sub.Backoff, d.Attempt))
		return 0, false
	}
	if m.Ack() != nil {
		return 0, false
	}
	md, _ := m.Metadata() // delivery read it already
	return md.Sequence.Stream, true
}

// delivery decodes a message; one that cannot be is dropped (terminated)
// with an error in the log.
func (s *subscriber) delivery(m jetstream.Msg) (*keelevents.Delivery, bool) {
	md, err := m.Metadata()
	if err != nil {
		s.b.log.Error("jetstream: message without metadata, dropped", "subject", m.Subject(), "error", err)
		_ = m.Term()
		return nil, false
	}
	msg, err := decode(natsMsg(m))
	if err != nil {
		s.b.log.Error("jetstream: undecodable message, dropped", "stream", md.Stream, "sequence", md.Sequence.Stream, "error", err)
		_ = m.Term()
		return nil, false
	}
	return &keelevents.Delivery{Message: msg, Attempt: int(md.NumDelivered)}, true
}

func (s *subscriber) call(d *keelevents.Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("jetstream: handler panicked: %v", r)
		}
	}()
	return s.h(s.hctx, d)
}

// Stop stops pulling, handles what the client had already received, waits
// for the handler calls in flight (ctx bounds the wait; past it their
// context is cancelled and what is left is handed back) and flushes the
// acknowledgements to the server.
func (s *subscriber) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.stopFetch()
		finished := make(chan struct{})
		go func() {
			s.loops.Wait()
			s.handlers.Wait()
			close(finished)
		}()
		select {
		case <-finished:
		case <-ctx.Done():
			s.cancelH()
			s.stopErr = fmt.Errorf("jetstream: stopping consumer %s: handlers still running: %w", s.sub.Consumer, ctx.Err())
		}
		s.cancelH()
		if s.stopErr == nil && !s.b.nc.IsClosed() {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			// Acks are fire-and-forget; a flush makes sure the server has
			// them before the caller starts another subscriber.
			_ = s.b.nc.FlushWithContext(fctx)
			if s.win != nil {
				s.win.unpin(fctx)
			}
			cancel()
		}
		s.b.mu.Lock()
		delete(s.b.subs, s)
		s.b.mu.Unlock()
		close(s.done)
	})
	return s.stopErr
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
