package eventcrash

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keelevents"
)

// RelayKilled: relay processes are SIGKILLed between a publish the bus
// acknowledged and its mark, again and again; the next relay republishes
// the unmarked batch with the same ids. No event is lost, the duplicates
// are absorbed (by the bus and by the inbox) and every event has exactly
// one business effect, applied in order per key.
func RelayKilled(t *testing.T, h Harness) {
	each(t, h, relayKilled[pgx.Tx], relayKilled[*sql.Tx])
}

func relayKilled[TTx any](t *testing.T, e *env[TTx]) {
	e.exec(t, effectSQL)
	ev, _ := e.events(t, false)
	var ord order
	if err := ev.Consume(effectConsumer[TTx](e.driver, ord.add)); err != nil {
		t.Fatal(err)
	}
	startEvents(t, ev)
	const n, keys, rounds = 600, 20, 8
	e.emitAll(t, ev, 0, n, keys)
	kills := 0
	for i := range rounds {
		p := spawn(t, e.h, "relay", e.driver, e.dsn, e.ns, 1+i%3, "relay")
		if !blockedOrDone(t, p, func() bool { return backlog(t, ev) == 0 }) {
			p.kill()
			break
		}
		p.kill()
		kills++
	}
	spawn(t, e.h, "relay", e.driver, e.dsn, e.ns, 0, "relay-final")
	waitFor(t, "every effect", 2*time.Minute, func() bool { return e.count(t, "SELECT count(*) FROM evcrash_effect") >= n })
	waitFor(t, "an empty outbox", time.Minute, func() bool { return backlog(t, ev) == 0 })
	e.checkEffects(t, n)
	ord.check(t)
	// Each kill left a published batch unmarked, which the next relay
	// published again with the same ids: all of it is marked now, once.
	if kills < 4 {
		t.Fatalf("only %d relays were killed between publish and mark", kills)
	}
	t.Logf("%s: %d relays killed between a publish and its mark; %d events, one effect each", e.h.Bus, kills, n)
}

// ConsumerKilled: consumer processes are SIGKILLed after their business
// transaction (effect and inbox row) committed and before the bus heard
// the acknowledgement; the event is redelivered, the inbox absorbs it and
// there is one effect per event.
func ConsumerKilled(t *testing.T, h Harness) {
	each(t, h, consumerKilled[pgx.Tx], consumerKilled[*sql.Tx])
}

func consumerKilled[TTx any](t *testing.T, e *env[TTx]) {
	e.exec(t, effectSQL)
	ev, _ := e.events(t, true)
	startEvents(t, ev)
	const n = 300
	kills := killConsumers(t, e, ev, n, 20, 6, func(i int) int { return 5 + 7*i }, 2*time.Minute)
	var dups int64
	waitFor(t, "the redeliveries absorbed", time.Minute, func() bool {
		cs, err := ev.ConsumerStats(context.Background())
		if err != nil || len(cs) != 1 {
			return false
		}
		dups = cs[0].Duplicates
		return cs[0].Lag == 0 && dups >= int64(kills)
	})
	e.checkEffects(t, n)
	if kills < 3 {
		t.Fatalf("only %d consumers were killed after a commit", kills)
	}
	t.Logf("%s: %d consumers killed after a commit; %d redeliveries absorbed by the inbox", e.h.Bus, kills, dups)
}

// killConsumers runs the consumer in child processes only (the first one
// creates the durable consumer before anything is published), emits n
// events over keys, and for up to rounds children SIGKILLs each right
// after its blockAt(i)-th commit; then a last child runs to the end. It
// returns how many children were killed after a commit.
func killConsumers[TTx any](t *testing.T, e *env[TTx], ev *keelevents.Events[TTx], n, keys, rounds int,
	blockAt func(round int) int, within time.Duration) int {
	t.Helper()
	effects := func() int { return e.count(t, "SELECT count(*) FROM evcrash_effect") }
	first := spawn(t, e.h, "consumer", e.driver, e.dsn, e.ns, blockAt(0), "consumer")
	waitChan(t, "the first consumer", first.ready, first.exited)
	e.emitAll(t, ev, 0, n, keys)
	kills := 0
	for i := range rounds {
		p := first
		if i > 0 {
			p = spawn(t, e.h, "consumer", e.driver, e.dsn, e.ns, blockAt(i), "consumer")
		}
		if !blockedOrDone(t, p, func() bool { return effects() >= n }) {
			p.kill()
			break
		}
		p.kill()
		kills++
	}
	last := spawn(t, e.h, "consumer", e.driver, e.dsn, e.ns, 0, "consumer-final")
	waitOr(t, "every effect", within, func() bool { return effects() >= n }, func() string {
		out := e.missing(t, n)
		select {
		case <-last.exited:
			out += "\nthe last consumer has exited"
		default:
		}
		return out
	})
	return kills
}

// WindowConsumerKilled: consumer processes with an ordered window
// (Consumer.Window, on a bus that has one) are SIGKILLed right after a
// window's transaction committed, each with deliveries of several
// partitions held, and a successor takes the partitions over once the bus
// lets it. Every event has exactly one effect, and every key's effects
// were written in emit order across the processes. PostgreSQL only: the
// effects are numbered by a sequence.
func WindowConsumerKilled(t *testing.T, h Harness, window int) {
	h.Env = append(h.Env, EnvWindow+"="+strconv.Itoa(window))
	h.SQLite = false
	each(t, h, windowConsumerKilled[pgx.Tx], nil)
}

func windowConsumerKilled[TTx any](t *testing.T, e *env[TTx]) {
	e.exec(t, effectSQL)
	e.exec(t, effectSeqSQL)
	ev, _ := e.events(t, true)
	startEvents(t, ev)
	const n = 400
	// A successor waits out the dead owner's pins (2 × AckWait + 10 s).
	kills := killConsumers(t, e, ev, n, 16, 3, func(i int) int { return 3 + 2*i }, 3*time.Minute)
	waitFor(t, "the redeliveries absorbed", time.Minute, func() bool {
		cs, err := ev.ConsumerStats(context.Background())
		return err == nil && len(cs) == 1 && cs[0].Lag == 0
	})
	e.checkEffects(t, n)
	// Each key's effects, in the order they were written, carry 0, 1, 2...
	rows, err := e.db.Query(context.Background(), "SELECT event_key, n FROM evcrash_effect ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	var ord order
	for rows.Next() {
		var key string
		var k int
		if err := rows.Scan(&key, &k); err != nil {
			t.Fatal(err)
		}
		ord.add(key, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if t.Failed() {
		return
	}
	defer func() {
		if t.Failed() {
			rows, err := e.db.Query(context.Background(), "SELECT seq, event_key, n, pid FROM evcrash_effect ORDER BY seq")
			if err != nil {
				return
			}
			defer rows.Close()
			for rows.Next() {
				var seq int64
				var key string
				var k, pid int
				_ = rows.Scan(&seq, &key, &k, &pid)
				t.Logf("effect %d: %s #%d by %d", seq, key, k, pid)
			}
		}
	}()
	ord.check(t)
	pids := e.count(t, "SELECT count(DISTINCT pid) FROM evcrash_effect")
	if kills < 2 || pids < 3 {
		t.Fatalf("%d consumers killed after a commit, effects written by %d processes", kills, pids)
	}
	t.Logf("%s: %d windowed consumers killed after a commit; effects from %d processes, in order per key", e.h.Bus, kills, pids)
}

// ThreeRelays: three relay processes share the partitions (one killed and
// replaced midway) while events are emitted for keys spread over every
// partition; each key's events are applied in order, once.
func ThreeRelays(t *testing.T, h Harness) {
	each(t, h, threeRelays[pgx.Tx], threeRelays[*sql.Tx])
}

func threeRelays[TTx any](t *testing.T, e *env[TTx]) {
	e.exec(t, effectSQL)
	ev, _ := e.events(t, false)
	var ord order
	if err := ev.Consume(effectConsumer[TTx](e.driver, ord.add)); err != nil {
		t.Fatal(err)
	}
	startEvents(t, ev)
	var relays []*proc
	for range 3 {
		relays = append(relays, spawn(t, e.h, "relay", e.driver, e.dsn, e.ns, 0, "relay"))
	}
	owners := func() int {
		return e.count(t, "SELECT count(DISTINCT owner) FROM keel_events_relay_lease WHERE owner <> ''")
	}
	waitFor(t, "three relays sharing the partitions", time.Minute, func() bool { return owners() == 3 })
	const n, keys = 900, 40
	e.emitAll(t, ev, 0, n/2, keys)
	relays[0].kill()
	relays[0] = spawn(t, e.h, "relay", e.driver, e.dsn, e.ns, 0, "relay-replacement")
	e.emitAll(t, ev, n/2, n, keys)
	waitFor(t, "every effect", 2*time.Minute, func() bool { return e.count(t, "SELECT count(*) FROM evcrash_effect") >= n })
	waitFor(t, "three relays sharing the partitions again", time.Minute, func() bool { return owners() == 3 })
	e.checkEffects(t, n)
	ord.check(t)
}

func startEvents[TTx any](t *testing.T, ev *keelevents.Events[TTx]) {
	t.Helper()
	if err := ev.Start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = ev.Stop(ctx)
	})
}

func backlog[TTx any](t *testing.T, ev *keelevents.Events[TTx]) int64 {
	t.Helper()
	ts, err := ev.TopicStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var b int64
	for _, s := range ts {
		b += s.Backlog
	}
	return b
}

// blockedOrDone waits until p blocks (true) or done holds (false).
func blockedOrDone(t *testing.T, p *proc, done func() bool) bool {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.blocked:
			return true
		case <-p.exited:
			t.Fatal("a child exited on its own")
		case <-deadline:
			t.Fatal("timed out waiting for a child to block")
		case <-tick.C:
			if done() {
				return false
			}
		}
	}
}
