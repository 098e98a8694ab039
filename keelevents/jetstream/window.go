package jetstream

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/keelwork/keel/keelevents"
)

// An ordered subscription with a window (Subscription.Window) keeps its
// consumer per partition but lets Window deliveries of a partition be
// unacknowledged at once, and the client keeps them in order: the
// deliveries it holds wait in one lane per partition, one goroutine hands
// what is ready to HandleWindow, a call at a time, and a failed delivery
// is retried in place after the backoff with the later ones of its lane
// behind it. It is never handed back, since the server would then deliver
// the later ones first.
//
// That order holds only while one instance receives a partition's
// deliveries. The consumers are therefore pinned (a priority group with
// the pinned-client policy, NATS 2.11 and later): the server sends a
// consumer's messages to one client at a time and moves the pin only when
// that client has sent no pull request for PinnedTTL, or when it unpins on
// stop. PinnedTTL is kept longer than AckWait plus a pull's expiry, so
// that the deliveries a crashed owner held have expired and are
// redelivered, first and in order, before the next owner's first new
// message. Against a server without pinning the subscription falls back to
// one delivery in flight per partition, under the same consumer names, so
// a server upgrade changes the pace, not the consumers.

// pinGroup is the priority group of windowed consumers.
const pinGroup = "keel"

// pullExpiry is how long a windowed subscription's pull requests wait on
// the server, the longest an owner goes without sending one: its AckWait,
// within 10 s (twice the heartbeat, which nats.go requires) and 30 s
// (nats.go's default).
func pullExpiry(ackWait time.Duration) time.Duration {
	return min(30*time.Second, max(10*time.Second, ackWait))
}

// pinnedTTL is the pin's lease for an ack wait: a crashed owner's last
// pull request may be a pull expiry older than its last progress report,
// and the deliveries it held expire an AckWait after that report; twice
// AckWait leaves the server's expiry check its time. With the default
// AckWait (30 s) a partition waits 90 s for a new owner after a crash, and
// not at all after a stop, which unpins.
func pinnedTTL(ackWait time.Duration) time.Duration {
	return 2*ackWait + pullExpiry(ackWait)
}

// serverPins reports whether the connected server has pinned consumers
// (2.11 and later).
func serverPins(version string) bool { return serverAtLeast(version, 2, 11, 0) }

// window returns the subscription's effective window: 0 when it has
// none or the server cannot pin.
func (b *Bus) window(sub keelevents.Subscription) int {
	w := sub.Window
	if b.cfg.MaxWindow > 0 {
		w = min(w, b.cfg.MaxWindow)
	}
	if !sub.Ordered || sub.HandleWindow == nil || w <= 1 {
		return 0
	}
	if v := b.nc.ConnectedServerVersion(); !serverPins(v) {
		b.log.Info("jetstream: the server has no pinned consumers (2.11 and later); one delivery in flight per partition",
			"consumer", sub.Consumer, "server", v)
		return 0
	}
	return w
}

// heldMsg is a delivery a windowed subscription holds.
type heldMsg struct {
	m       jetstream.Msg
	d       *keelevents.Delivery
	seq     uint64 // stream sequence
	durable string // the consumer it came from
}

type lane struct {
	msgs      []*heldMsg
	busy      int       // the first busy msgs are in the handler's call
	notBefore time.Time // after a failure: when to retry its first delivery
}

// windower holds a windowed subscription's deliveries in lanes and hands
// them to HandleWindow.
type windower struct {
	s    *subscriber
	wake chan struct{}

	callMax int // deliveries per HandleWindow call

	mu         sync.Mutex
	lanes      []lane
	pullsDone  bool              // no delivery will be added
	pins       map[string]string // durable -> the pin this instance last got
	unverified map[string]bool   // durables pinned anew, not yet checked
}

func newWindower(s *subscriber, partitions int) *windower {
	callMax := s.sub.WindowBatch
	if callMax <= 0 || callMax > keelevents.MaxBatch {
		callMax = keelevents.MaxBatch
	}
	return &windower{s: s, wake: make(chan struct{}, 1), callMax: callMax, lanes: make([]lane, partitions),
		pins: map[string]string{}, unverified: map[string]bool{}}
}

func (w *windower) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// add queues a received message on its partition's lane, in stream
// order: a redelivery the server sends after later messages of the
// partition (its expiry came later than theirs) still goes before them if
// they are not handed out yet.
func (w *windower) add(m jetstream.Msg, partition int, durable string) {
	d, ok := w.s.delivery(m)
	if !ok {
		return
	}
	var seq uint64
	if md, err := m.Metadata(); err == nil {
		seq = md.Sequence.Stream
	}
	w.mu.Lock()
	if pin := m.Headers().Get("Nats-Pin-Id"); pin != "" && pin != w.pins[durable] {
		// Pinned anew: what a previous owner held may come back after
		// this, and nothing of the consumer is handed out until verify
		// has seen it all here.
		w.pins[durable] = pin
		w.unverified[durable] = true
	}
	l := &w.lanes[partition]
	i := len(l.msgs)
	for i > l.busy && l.msgs[i-1].seq > seq {
		i--
	}
	l.msgs = slices.Insert(l.msgs, i, &heldMsg{m: m, d: d, seq: seq, durable: durable})
	w.mu.Unlock()
	w.signal()
}

// run hands ready deliveries to the handler until the subscription stops
// and nothing is ready (what waits out a backoff is handed back), or the
// stop gives up waiting (the rest is handed back).
func (w *windower) run() {
	defer w.s.handlers.Done()
	s := w.s
	// Progress is reported from its own goroutine, also while a call runs
	// long: a held delivery that expired on a live owner would be sent to
	// it again, and its pending time would then fall after later
	// deliveries' — after a crash the next owner would get them back out of
	// order.
	stopProgress := make(chan struct{})
	defer close(stopProgress)
	go func() {
		tick := time.NewTicker(s.sub.AckWait / 3)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				w.progress()
			case <-stopProgress:
				return
			}
		}
	}()
	start := 0
	for {
		recheck := w.verify()
		ms, counts, next, idle := w.collect(time.Now(), start)
		if recheck && (next.IsZero() || time.Until(next) > verifyEvery) {
			next = time.Now().Add(verifyEvery)
		}
		start++
		if len(ms) > 0 {
			w.settle(ms, counts, s.callWindow(ms))
			continue
		}
		if idle {
			// Stopping: what waits out a backoff is handed back, in
			// order, for whichever instance owns the partition next.
			w.handBack()
			return
		}
		var retry <-chan time.Time
		var t *time.Timer
		if !next.IsZero() {
			t = time.NewTimer(time.Until(next))
			retry = t.C
		}
		select {
		case <-w.wake:
		case <-retry:
		case <-s.hctx.Done():
			w.handBack()
			return
		}
		if t != nil {
			t.Stop()
		}
	}
}

// collect takes the ready deliveries of every lane not waiting out a
// backoff, each lane's in order, starting at a rotating lane so that a
// full call does not always favour the first partitions. It returns them,
// how many it took from each lane, the earliest retry time of the waiting
// lanes, and whether the windower is done: stopped, with nothing ready.
func (w *windower) collect(now time.Time, start int) (ms []*heldMsg, counts []int, next time.Time, idle bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	counts = make([]int, len(w.lanes))
	for i := range w.lanes {
		p := (start + i) % len(w.lanes)
		l := &w.lanes[p]
		if len(l.msgs) == 0 {
			continue
		}
		if now.Before(l.notBefore) {
			if next.IsZero() || l.notBefore.Before(next) {
				next = l.notBefore
			}
			continue
		}
		if w.laneUnverified(l) {
			continue
		}
		k := min(len(l.msgs), w.callMax-len(ms))
		ms = append(ms, l.msgs[:k]...)
		counts[p] = k
		l.busy = k
		if len(ms) == w.callMax {
			break
		}
	}
	return ms, counts, next, len(ms) == 0 && w.pullsDone
}

// settle acknowledges what the handler applied and keeps the rest: in a
// lane, the first failed delivery waits out its backoff and the later ones
// stay behind it.
func (w *windower) settle(ms []*heldMsg, counts []int, errs []error) {
	s := w.s
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, n := range counts {
		if n == 0 {
			continue
		}
		l := &w.lanes[p]
		kept := l.msgs[:0:0]
		failed := false
		for _, h := range l.msgs[:n] {
			i := indexOf(ms, h)
			if errs[i] == nil {
				_ = h.m.Ack()
				continue
			}
			if !failed {
				failed = true
				l.notBefore = time.Now().Add(keelevents.BackoffFor(s.sub.Backoff, h.d.Attempt))
				h.d.Attempt++
			}
			kept = append(kept, h)
		}
		l.msgs = append(kept, l.msgs[n:]...)
		l.busy = 0
		if !failed {
			l.notBefore = time.Time{}
		}
	}
}

// verifyEvery is how often a consumer pinned anew is checked again while a
// previous owner's deliveries are still out.
const verifyEvery = 100 * time.Millisecond

func (w *windower) laneUnverified(l *lane) bool {
	if len(w.unverified) == 0 {
		return false
	}
	for _, h := range l.msgs {
		if w.unverified[h.durable] {
			return true
		}
	}
	return false
}

// verify checks the consumers this instance was pinned on anew: a
// previous owner that died holding deliveries has them pending until they
// expire, and the server may meanwhile send this instance later messages
// of the same partitions. A consumer is released to the handler only once
// the server counts no more unacknowledged deliveries than this instance
// holds of it: all of them are here, and the lanes keep them in stream
// order. It reports whether some consumer is still waiting.
//
// The held count is taken before the server's: deliveries that arrive or
// acknowledgements that are still on the way in between can only make the
// server's count larger, which waits longer, never shorter.
func (w *windower) verify() bool {
	w.mu.Lock()
	if len(w.unverified) == 0 {
		w.mu.Unlock()
		return false
	}
	held := make(map[string]int, len(w.unverified))
	for durable := range w.unverified {
		held[durable] = 0
	}
	for i := range w.lanes {
		for _, h := range w.lanes[i].msgs {
			if _, ok := held[h.durable]; ok {
				held[h.durable]++
			}
		}
	}
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(w.s.hctx, 5*time.Second)
	defer cancel()
	waiting := false
	for durable, n := range held {
		pending, err := w.s.ackPending(ctx, durable)
		if err != nil || pending > n {
			if err != nil {
				w.s.b.log.Debug("jetstream: checking a consumer pinned anew", "consumer", durable, "error", err)
			}
			waiting = true
			continue
		}
		w.mu.Lock()
		delete(w.unverified, durable)
		w.mu.Unlock()
	}
	return waiting
}

// ackPending is the server's count of a consumer's unacknowledged
// deliveries.
func (s *subscriber) ackPending(ctx context.Context, durable string) (int, error) {
	for i := range s.consumers {
		c := &s.consumers[i]
		if c.cfg.Durable != durable {
			continue
		}
		cons, err := s.b.js.Consumer(ctx, c.stream, durable)
		if err != nil {
			return 0, err
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return 0, err
		}
		return info.NumAckPending, nil
	}
	return 0, fmt.Errorf("no consumer %s", durable)
}

func indexOf(ms []*heldMsg, h *heldMsg) int {
	for i, x := range ms {
		if x == h {
			return i
		}
	}
	panic("jetstream: a settled delivery was not handed out")
}

// progress tells the server that every held delivery is still being
// worked on, so that none is redelivered behind this instance's back.
func (w *windower) progress() { w.each(false, jetstream.Msg.InProgress) }

// handBack negatively acknowledges every held delivery, in order per
// lane, when a stop gives up waiting.
func (w *windower) handBack() { w.each(true, jetstream.Msg.Nak) }

// each calls f on every held delivery, lane by lane in order, and empties
// the lanes if asked.
func (w *windower) each(empty bool, f func(jetstream.Msg) error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.lanes {
		for _, h := range w.lanes[i].msgs {
			_ = f(h.m)
		}
		if empty {
			w.lanes[i].msgs = nil
		}
	}
}

// pullsEnded is called once every pull loop has returned.
func (w *windower) pullsEnded() {
	w.mu.Lock()
	w.pullsDone = true
	w.mu.Unlock()
	w.signal()
}

// unpin releases the pins this instance holds, after its deliveries are
// settled, so that another instance takes the partitions over at once
// rather than after PinnedTTL. A pin is released only if the server still
// shows it as this instance's: another instance's must not be broken.
func (w *windower) unpin(ctx context.Context) {
	w.mu.Lock()
	pins := make(map[string]string, len(w.pins))
	for k, v := range w.pins {
		pins[k] = v
	}
	w.mu.Unlock()
	for i := range w.s.consumers {
		c := &w.s.consumers[i]
		pin := pins[c.cfg.Durable]
		if pin == "" {
			continue
		}
		st, err := w.s.b.js.Stream(ctx, c.stream)
		if err != nil {
			continue
		}
		cons, err := st.Consumer(ctx, c.cfg.Durable)
		if err != nil {
			continue
		}
		info, err := cons.Info(ctx)
		if err != nil {
			continue
		}
		for _, g := range info.PriorityGroups {
			if g.Group == pinGroup && g.PinnedClientID == pin {
				if err := st.UnpinConsumer(ctx, c.cfg.Durable, pinGroup); err != nil {
					w.s.b.log.Debug("jetstream: unpinning on stop failed", "consumer", c.cfg.Durable, "error", err)
				}
			}
		}
	}
}

// callWindow runs HandleWindow; a panic fails every delivery of the call.
func (s *subscriber) callWindow(ms []*heldMsg) (errs []error) {
	ds := make([]*keelevents.Delivery, len(ms))
	for i, h := range ms {
		ds[i] = h.d
	}
	defer func() {
		if r := recover(); r != nil {
			errs = make([]error, len(ms))
			for i := range errs {
				errs[i] = fmt.Errorf("jetstream: window handler panicked: %v", r)
			}
		}
	}()
	errs = s.sub.HandleWindow(s.hctx, ds)
	if len(errs) != len(ds) {
		err := fmt.Errorf("jetstream: window handler returned %d results for %d deliveries", len(errs), len(ds))
		errs = make([]error, len(ds))
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}
