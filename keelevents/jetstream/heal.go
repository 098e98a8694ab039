package jetstream

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Servers before 2.10.14 move a consumer's position back by one whenever
// they try a redelivery and find only pull requests whose client is gone
// (the delivery loop's "redo this one" step does not tell a redelivery
// from a new message). The first step back costs a duplicate, which the
// inbox absorbs; a consumer whose instances keep dying while a delivery
// is due (MaxAckPending 1, an ordered partition) steps back past zero. Its
// position then reads as 2^64-2, past the end of the stream, and the
// server never delivers to it again: new events of the partition pile up
// unseen and only the inbox's lag shows it. It was seen on Debian's 2.9.10
// in the consumer crash scenarios, about once in ten runs under load.
//
// Against such a server every subscriber checks its consumers every
// Config.HealEvery; one whose delivered position is past the stream's
// last sequence is deleted and created again at its acknowledgement
// floor plus one (healFrom: the server may have lost the floor too). What
// comes again is absorbed by the inbox, and the partition's order holds:
// nothing after the floor was acknowledged.

// serverAtLeast reports whether version (a server's "2.9.10" or
// "v2.15.2") is at least major.minor.patch; an unreadable one is not.
func serverAtLeast(version string, major, minor, patch int) bool {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	nums := make([]int, 3)
	for i, p := range parts {
		// "2.11.0-beta.1": the pre-release does not change the comparison here.
		p, _, _ = strings.Cut(p, "-")
		n, err := strconv.Atoi(p)
		if err != nil {
			return false
		}
		nums[i] = n
	}
	want := []int{major, minor, patch}
	for i := range nums {
		if nums[i] != want[i] {
			return nums[i] > want[i]
		}
	}
	return true
}

// serverRewinds reports whether the server has the step-back fault.
func serverRewinds(version string) bool { return !serverAtLeast(version, 2, 10, 14) }

// DefaultHealEvery is how often subscribers on a server with the fault
// check their consumers.
const DefaultHealEvery = 30 * time.Second

// healGrace is how long a pull loop whose consumer vanished waits before
// creating it from now: another instance may be healing it, and a
// consumer created from now would skip what the healed one replays.
const healGrace = time.Second

// watch checks the subscriber's consumers every HealEvery until it stops.
func (s *subscriber) watch() {
	defer s.loops.Done()
	t := time.NewTicker(s.b.cfg.HealEvery)
	defer t.Stop()
	for {
		select {
		case <-s.fetchCtx.Done():
			return
		case <-t.C:
		}
		for i := range s.consumers {
			if s.fetchCtx.Err() != nil {
				return
			}
			s.checkConsumer(&s.consumers[i])
		}
	}
}

// checkConsumer heals c if the server left its position past the end of
// its stream.
func (s *subscriber) checkConsumer(c *consumerSpec) {
	ctx, cancel := context.WithTimeout(s.fetchCtx, 10*time.Second)
	defer cancel()
	ci, last, err := s.position(ctx, c)
	if err != nil || ci.Delivered.Stream <= last {
		return
	}
	// Read again: a consumer healed meanwhile by another instance is
	// back in range.
	if ci, last, err = s.position(ctx, c); err != nil || ci.Delivered.Stream <= last {
		return
	}
	from, err := s.healFrom(ctx, c, ci, last)
	if err != nil {
		return
	}
	s.b.log.Error("jetstream: the server lost this consumer's position (a fault of servers before 2.10.14); "+
		"recreating it from its acknowledgement floor, the inbox absorbs what comes again",
		"consumer", c.cfg.Durable, "stream", c.stream, "delivered_stream_seq", ci.Delivered.Stream,
		"stream_last_seq", last, "from_seq", from, "server", s.b.nc.ConnectedServerVersion())
	if err := s.b.js.DeleteConsumer(ctx, c.stream, c.cfg.Durable); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		s.b.log.Warn("jetstream: deleting a consumer to heal it", "consumer", c.cfg.Durable, "error", err)
		return
	}
	cfg := c.cfg
	cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	if _, err := s.b.js.CreateOrUpdateConsumer(ctx, c.stream, cfg); err != nil {
		// An instance that did not wait its grace created it from now: what
		// was published in between is found by reconciliation.
		s.b.log.Error("jetstream: recreating a healed consumer", "consumer", c.cfg.Durable, "from_seq", from, "error", err)
	}
}

// healFrom is where a lost consumer starts again: after its
// acknowledgement floor if that is in the stream's range; else (the
// server moves the floor with the lost position once nothing is pending)
// after what this instance last acknowledged on an ordered partition;
// else at the stream's first message, the inbox absorbing all of it.
func (s *subscriber) healFrom(ctx context.Context, c *consumerSpec, ci *jetstream.ConsumerInfo, last uint64) (uint64, error) {
	if ci.AckFloor.Stream <= last {
		return ci.AckFloor.Stream + 1, nil
	}
	if a := c.acked.Load(); a > 0 && a <= last {
		return a + 1, nil
	}
	st, err := s.b.js.Stream(ctx, c.stream)
	if err != nil {
		return 0, err
	}
	return max(st.CachedInfo().State.FirstSeq, 1), nil
}

// position reads c's consumer and its stream's last sequence, in that
// order: the stream only grows, so a position past that last sequence
// was past it when the consumer was read.
func (s *subscriber) position(ctx context.Context, c *consumerSpec) (*jetstream.ConsumerInfo, uint64, error) {
	cons, err := s.b.js.Consumer(ctx, c.stream, c.cfg.Durable)
	if err != nil {
		return nil, 0, err
	}
	ci := cons.CachedInfo()
	st, err := s.b.js.Stream(ctx, c.stream)
	if err != nil {
		return nil, 0, err
	}
	return ci, st.CachedInfo().State.LastSeq, nil
}

// ensureConsumer creates c's consumer or updates it, keeping the start
// position of one that exists (a healed consumer starts at a sequence;
// the server refuses to change a start). again is set when the consumer
// vanished under a running subscription: it is then created from now
// only after healGrace, in case an instance is healing it.
func (s *subscriber) ensureConsumer(ctx context.Context, c *consumerSpec, again bool) (jetstream.Consumer, error) {
	cfg := c.cfg
	cur, err := s.b.js.Consumer(ctx, c.stream, c.cfg.Durable)
	if again && errors.Is(err, jetstream.ErrConsumerNotFound) {
		if !sleepCtx(ctx, healGrace) {
			return nil, ctx.Err()
		}
		cur, err = s.b.js.Consumer(ctx, c.stream, c.cfg.Durable)
	}
	switch {
	case err == nil:
		old := cur.CachedInfo().Config
		cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = old.DeliverPolicy, old.OptStartSeq, old.OptStartTime
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return nil, err
	}
	return s.b.js.CreateOrUpdateConsumer(ctx, c.stream, cfg)
}
