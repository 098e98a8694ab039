package keelevents

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/keelwork/keel"
)

// Start seeds the partition leases, subscribes every consumer to the bus,
// and starts the relay (unless Config.DisableRelay) and the gauges'
// refresh. client is used to audit operator actions (Replay); it may be
// nil in a process that never replays. Start returns once all of it runs.
func (e *Events[TTx]) Start(ctx context.Context, client *keel.Client[TTx]) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started {
		return errors.New("keelevents: already started")
	}
	parts, err := e.partitions(ctx, e.db)
	if err != nil {
		return err
	}
	for p := range parts {
		if _, err := e.db.Exec(ctx, e.d.sql("LeaseSeed"), p); err != nil {
			return fmt.Errorf("seeding relay partitions: %w", err)
		}
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var subs []Subscriber
	for _, name := range slices.Sorted(maps.Keys(e.consumers)) {
		c := e.consumers[name]
		if _, err := e.db.Exec(ctx, e.d.sql("ConsumerUpsert"), c.Name, topicsJSON(c.Topics), c.Ordered, c.MaxAttempts, now()); err != nil {
			cancel()
			return errors.Join(fmt.Errorf("registering consumer %s: %w", c.Name, err), stopAll(subs))
		}
		s, err := e.bus.Subscribe(runCtx, c.subscription(), c.handle)
		if err != nil {
			cancel()
			return errors.Join(fmt.Errorf("subscribing consumer %s: %w", c.Name, err), stopAll(subs))
		}
		subs = append(subs, s)
	}
	e.subs, e.cancel, e.client, e.started = subs, cancel, client, true
	if !e.cfg.DisableRelay {
		r := &relay[TTx]{e: e, owner: instanceID(), held: map[int]int64{}}
		e.goRun(func() { r.run(runCtx) })
		if client != nil && e.d.pg && client.Driver().SupportsListener() {
			e.goRun(func() { e.listenOutbox(runCtx, client.Driver()) })
		}
	}
	e.goRun(func() { e.refreshLoop(runCtx) })
	return nil
}

func (e *Events[TTx]) goRun(f func()) {
	done := make(chan struct{})
	e.done = append(e.done, done)
	go func() { defer close(done); f() }()
}

func stopAll(subs []Subscriber) error {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultAckWait)
	defer cancel()
	var errs []error
	for _, s := range subs {
		errs = append(errs, s.Stop(ctx))
	}
	return errors.Join(errs...)
}

// Stop stops the consumers (their in-flight handlers finish), the relay
// (which gives its partitions back) and the refresh, waiting until ctx
// ends at most. It does not close the bus, which the caller owns.
func (e *Events[TTx]) Stop(ctx context.Context) error {
	e.mu.Lock()
	if !e.started {
		e.mu.Unlock()
		return nil
	}
	subs, cancel, done := e.subs, e.cancel, e.done
	e.subs, e.done, e.started = nil, nil, false
	e.mu.Unlock()
	var errs []error
	for _, s := range subs {
		errs = append(errs, s.Stop(ctx))
	}
	cancel()
	for _, d := range done {
		select {
		case <-d:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("stopping the relay: %w", ctx.Err()))
		}
	}
	return errors.Join(errs...)
}

// refreshLoop refreshes the gauges from the database.
func (e *Events[TTx]) refreshLoop(ctx context.Context) {
	t := time.NewTicker(e.cfg.StatsInterval)
	defer t.Stop()
	for {
		e.refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (e *Events[TTx]) refresh(ctx context.Context) {
	at := time.Now()
	if topics, err := e.TopicStats(ctx); err == nil {
		e.m.backlog.Reset()
		e.m.oldestUnpublished.Reset()
		for _, s := range topics {
			e.m.backlog.WithLabelValues(s.Topic).Set(float64(s.Backlog))
			age := 0.0
			if s.OldestUnpublished != nil {
				age = at.Sub(*s.OldestUnpublished).Seconds()
			}
			e.m.oldestUnpublished.WithLabelValues(s.Topic).Set(age)
		}
	} else if ctx.Err() == nil {
		e.cfg.Logger.Warn("keelevents: refreshing outbox gauges", "err", err)
	}
	if cons, err := e.ConsumerStats(ctx); err == nil {
		for _, s := range cons {
			e.m.lag.WithLabelValues(s.Name).Set(float64(s.Lag))
			age := 0.0
			if s.OldestUnacked != nil {
				age = at.Sub(*s.OldestUnacked).Seconds()
			}
			e.m.oldestUnacked.WithLabelValues(s.Name).Set(age)
		}
	} else if ctx.Err() == nil {
		e.cfg.Logger.Warn("keelevents: refreshing consumer gauges", "err", err)
	}
}
