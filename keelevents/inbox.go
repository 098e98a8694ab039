package keelevents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
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
	// (inbox row included) and the event is redelivered. Exactly one of
	// Handle and HandleBatch is set.
	Handle func(ctx context.Context, tx keelsql.Tx[TTx], d *Delivery) error
	// HandleBatch applies several events in tx at once (a set-based effect:
	// one multi-row statement for the batch), in delivery order. It implies
	// Batch (default DefaultBatch). An error rolls the whole batch back and
	// its events are then handled one per transaction, HandleBatch called
	// with one delivery each, so a failing event is isolated and the others
	// commit (when a batch held only one new event, its error is that
	// event's, as if it had been alone, and it is not handled again). A
	// handler that can tell which of its events failed returns BatchErrors
	// instead: the others commit without being handled again.
	HandleBatch func(ctx context.Context, tx keelsql.Tx[TTx], ds []*Delivery) error
	// Batch lets up to Batch deliveries share one transaction: deliveries
	// that arrive while this consumer's previous transaction commits are
	// applied together in the next one, with one inbox statement for all of
	// them (group commit: nothing waits for a batch to fill, so a lone
	// event is not delayed). Each event is still deduplicated by (consumer,
	// topic, event id) and digest; a redelivered or conflicting one inside a
	// batch is absorbed or quarantined as alone. If the transaction fails,
	// every event of the batch is retried alone in its own transaction, so
	// one failing event goes to redelivery or manual without the others.
	// With Handle, the handler is called once per event in the shared
	// transaction, and again for each event if the batch is retried alone:
	// only what it does in tx counts once. 0 or 1: one event per
	// transaction.
	Batch int
	// Window, with Ordered, lets up to Window events of one key be in
	// flight at once, on a bus that can make one instance the owner of a
	// partition (JetStream 2.11 and later; see keelevents.Subscription):
	// the events the bus has ready are applied in transactions of up to
	// Batch (default DefaultBatch), in order, and an event that fails holds
	// back the later ones of its key, which are retried behind it. It lifts
	// an ordered consumer's bound of one round trip (delivery, commit,
	// acknowledgement) per key and event. 0 or 1: one in flight per
	// partition.
	Window int
}

// BatchErrors is what HandleBatch returns when it can tell which of its
// deliveries failed: one entry per delivery, in the order given, nil for
// each one applied. The applied ones commit with the transaction and are
// acknowledged; each failed one's inbox row is taken back in the same
// transaction and the delivery is answered with its error, so the bus
// redelivers it after its backoff (or it goes to manual past MaxAttempts),
// as if it had failed alone. What the handler wrote in tx for a failed
// delivery commits too: it must write nothing for one it reports failed.
//
// It lets a handler whose effect leaves the transaction (a message sent to
// a counterpart) isolate one failure without the others being handled, and
// so sent, again. A statement that fails in tx still fails the whole
// transaction (PostgreSQL refuses the rest of it), and then every event is
// handled again alone. An ordered consumer with a Window treats BatchErrors
// as a failure of the whole batch: a later event of a failed event's
// partition must not commit before it.
type BatchErrors []error

func (b BatchErrors) Error() string {
	n := 0
	var first error
	for _, err := range b {
		if err != nil {
			if first == nil {
				first = err
			}
			n++
		}
	}
	if first == nil {
		return "keelevents: no delivery of the batch failed"
	}
	return fmt.Sprintf("keelevents: %d of %d deliveries failed, first: %v", n, len(b), first)
}

// failed says whether any entry is an error.
func (b BatchErrors) failed() bool {
	return slices.ContainsFunc(b, func(err error) bool { return err != nil })
}

// DefaultBatch is Consumer.Batch's default with HandleBatch.
const DefaultBatch = 100

// MaxBatch bounds Consumer.Batch.
const MaxBatch = 1000

type consumer[TTx any] struct {
	Consumer[TTx]
	e *Events[TTx]

	mu       sync.Mutex
	queue    []*waiting // deliveries waiting for the next batch
	flushing bool       // a flusher goroutine is running
}

// waiting is a delivery queued for a batch and the channel its result is
// sent on.
type waiting struct {
	d      *Delivery
	digest string
	done   chan error
}

// Consume registers a consumer; call it before Start.
func (e *Events[TTx]) Consume(c Consumer[TTx]) error {
	c.Topics = append([]string(nil), c.Topics...)
	sub := Subscription{Consumer: c.Name, Topics: c.Topics, Ordered: c.Ordered, AckWait: c.AckWait, Backoff: c.Backoff}
	if err := validateSubscription(&sub); err != nil {
		return err
	}
	if (c.Handle == nil) == (c.HandleBatch == nil) {
		return invalid("consumer %s needs exactly one of Handle and HandleBatch", c.Name)
	}
	if c.MaxAttempts < 0 || c.MaxAttempts > 1000 {
		return invalid("consumer %s: MaxAttempts must be 0..1000", c.Name)
	}
	if c.Batch < 0 || c.Batch > MaxBatch {
		return invalid("consumer %s: Batch must be 0..%d", c.Name, MaxBatch)
	}
	if c.Window < 0 || c.Window > MaxWindow || (c.Window > 1 && !c.Ordered) {
		return invalid("consumer %s: Window must be 0..%d, and only with Ordered", c.Name, MaxWindow)
	}
	c.MaxAttempts = cmp.Or(c.MaxAttempts, DefaultMaxAttempts)
	if c.HandleBatch != nil || c.Window > 1 {
		c.Batch = cmp.Or(c.Batch, DefaultBatch)
	}
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
	sub := Subscription{Consumer: c.Name, Topics: c.Topics, Ordered: c.Ordered, AckWait: c.AckWait, Backoff: c.Backoff}
	if c.Batch > 1 {
		// Two batches' worth: one committing, the next one filling.
		sub.InFlight = 2 * c.Batch
	}
	if c.Window > 1 {
		sub.Window, sub.HandleWindow, sub.WindowBatch = c.Window, c.handleWindow, c.Batch
	}
	return sub
}

// errHeldBack answers a delivery of an ordered consumer's window that was
// not applied because an earlier event of its partition failed.
var errHeldBack = errors.New("keelevents: held back behind a failed event of its partition")

// handleWindow applies a windowed ordered subscription's ready deliveries
// (each partition's in order) in transactions of up to Batch, in order.
// Once an event of a partition fails, the later ones of that partition are
// answered errHeldBack and not applied, here and in the later
// transactions of the call: the bus retries the failed one first.
func (c *consumer[TTx]) handleWindow(ctx context.Context, ds []*Delivery) []error {
	errs := make([]error, len(ds))
	held := map[int]bool{}
	for start := 0; start < len(ds); start += c.Batch {
		end := min(start+c.Batch, len(ds))
		ws := make([]*waiting, end-start)
		for i := range ws {
			ws[i] = &waiting{d: ds[start+i], digest: Digest(ds[start+i].Payload), done: make(chan error, 1)}
		}
		c.runBatch(ctx, ws, held)
		for i, w := range ws {
			errs[start+i] = <-w.done
		}
	}
	return errs
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
	if c.Batch > 1 {
		return c.handleBatched(ctx, d)
	}
	return c.handleOne(ctx, d)
}

// handleOne applies one delivery in its own transaction.
func (c *consumer[TTx]) handleOne(ctx context.Context, d *Delivery) error {
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
		return c.apply(ctx, tx, []*Delivery{d})
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
	return c.failed(ctx, d, digest, err)
}

// failed answers a delivery whose handling failed with err: err itself,
// for the bus to redeliver, or, past the attempt budget, nil once the
// event is recorded as manual.
func (c *consumer[TTx]) failed(ctx context.Context, d *Delivery, digest string, err error) error {
	c.e.m.failures.WithLabelValues(c.Name).Inc()
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

// apply runs the consumer's handler on ds in tx: HandleBatch once, or
// Handle per delivery in order. A panic is an error like any other.
func (c *consumer[TTx]) apply(ctx context.Context, tx keelsql.Tx[TTx], ds []*Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("keelevents: handler panicked: %v", r)
		}
	}()
	if c.HandleBatch != nil {
		err := c.HandleBatch(ctx, tx, ds)
		var be BatchErrors
		if !errors.As(err, &be) {
			return err
		}
		switch {
		case len(be) != len(ds):
			return fmt.Errorf("keelevents: consumer %s: HandleBatch returned %d errors for %d deliveries", c.Name, len(be), len(ds))
		case !be.failed():
			return nil
		case len(ds) == 1:
			return be[0]
		}
		return be
	}
	for _, d := range ds {
		if err := c.Handle(ctx, tx, d); err != nil {
			if len(ds) > 1 {
				return fmt.Errorf("%s/%s: %w", d.Topic, d.ID, err)
			}
			return err
		}
	}
	return nil
}

// handleBatched queues d for the consumer's next batch transaction and
// waits for its outcome. The first delivery to find no flusher running
// starts one; the flusher takes whatever has queued (up to Batch) each
// time a transaction ends, so a batch is what arrived during the previous
// commit and nothing waits for a batch to fill.
func (c *consumer[TTx]) handleBatched(ctx context.Context, d *Delivery) error {
	w := &waiting{d: d, digest: Digest(d.Payload), done: make(chan error, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, w)
	if !c.flushing {
		c.flushing = true
		// The flusher outlives this call's context: the other deliveries
		// of its batch are not this one's to cancel. A delivery whose
		// context ends stops waiting; if its batch commits anyway, the
		// redelivery is absorbed by the inbox.
		go c.flush(context.WithoutCancel(ctx))
	}
	c.mu.Unlock()
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *consumer[TTx]) flush(ctx context.Context) {
	for {
		c.mu.Lock()
		n := min(len(c.queue), c.Batch)
		if n == 0 {
			c.flushing = false
			c.queue = nil
			c.mu.Unlock()
			return
		}
		batch := slices.Clone(c.queue[:n])
		c.queue = slices.Delete(c.queue, 0, n)
		c.mu.Unlock()
		c.runBatch(ctx, batch, nil)
	}
}

// runBatch applies a batch in one transaction: one statement inserts the
// inbox rows, the deliveries whose row existed already are absorbed or
// quarantined one by one (seen), and the handler gets the new ones. If
// anything fails, each delivery is handled alone (handleOne), so a failing
// event is redelivered or sent to manual on its own budget and the others
// commit; but when the handler failed the batch's only new delivery, that
// failure is its outcome and it is not handled again.
//
// held, for a window of an ordered consumer, collects the partitions with
// a failed event: their later deliveries are answered errHeldBack, not
// applied, so that nothing of a key commits past an event that did not.
func (c *consumer[TTx]) runBatch(ctx context.Context, batch []*waiting, held map[int]bool) {
	if held != nil {
		kept := batch[:0:0]
		for _, w := range batch {
			if held[w.d.Partition] {
				w.done <- errHeldBack
				continue
			}
			kept = append(kept, w)
		}
		batch = kept
	}
	if len(batch) == 0 {
		return
	}
	// answer gives w its outcome: err, computed by compute unless the
	// delivery is held back behind a failed event of its partition.
	answer := func(w *waiting, compute func() error) {
		if held != nil && held[w.d.Partition] {
			w.done <- errHeldBack
			return
		}
		err := compute()
		if err != nil && held != nil {
			held[w.d.Partition] = true
		}
		w.done <- err
	}
	one := func(w *waiting) { answer(w, func() error { return c.handleOne(ctx, w.d) }) }
	if len(batch) == 1 {
		one(batch[0])
		return
	}
	e := c.e
	// The same event twice in one batch (a redelivery racing the first
	// delivery): the later copies are handled after the batch, alone, and
	// so are absorbed like any redelivery.
	type tid struct{ topic, id string }
	first := make([]*waiting, 0, len(batch))
	var again []*waiting
	in := make(map[tid]bool, len(batch))
	for _, w := range batch {
		k := tid{w.d.Topic, w.d.ID}
		if in[k] {
			again = append(again, w)
			continue
		}
		in[k] = true
		first = append(first, w)
	}
	outs := make([]outcome, len(first))
	// partial holds, when the handler reported some deliveries failed
	// (BatchErrors), each new delivery's error; their inbox rows are taken
	// back before the commit.
	var partial map[*waiting]error
	// lone is the batch's only new delivery when the handler failed it,
	// and loneErr the handler's error: that is the delivery's outcome for
	// this attempt. Handling it again alone would call the handler twice
	// for one attempt (and a handler whose effect leaves the transaction,
	// a message to a counterpart, would send it twice).
	var lone *waiting
	var loneErr error
	err := e.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		partial, lone, loneErr = nil, nil, nil
		rows, err := tx.Query(ctx, e.d.sql("InboxInsertMany"), e.d.inboxRows(c.Name, first, now())...)
		ins, err := keelsql.CollectRows(rows, err, func(rs keelsql.Rows) (tid, error) {
			var k tid
			return k, rs.Scan(&k.topic, &k.id)
		})
		if err != nil {
			return fmt.Errorf("writing %d inbox rows: %w", len(first), err)
		}
		inserted := make(map[tid]bool, len(ins))
		for _, k := range ins {
			inserted[k] = true
		}
		fresh := make([]*Delivery, 0, len(first))
		freshW := make([]*waiting, 0, len(first))
		for i, w := range first {
			if inserted[tid{w.d.Topic, w.d.ID}] {
				outs[i] = applied
				fresh = append(fresh, w.d)
				freshW = append(freshW, w)
				continue
			}
			if outs[i], err = c.seen(ctx, tx, w.d, w.digest); err != nil {
				return err
			}
		}
		if len(fresh) == 0 {
			return nil
		}
		err = c.apply(ctx, tx, fresh)
		if err != nil && len(fresh) == 1 {
			lone, loneErr = freshW[0], err
		}
		var be BatchErrors
		if held != nil || !errors.As(err, &be) || len(be) != len(fresh) {
			return err
		}
		partial = make(map[*waiting]error)
		for i, w := range freshW {
			if be[i] == nil {
				continue
			}
			partial[w] = be[i]
			if _, err := tx.Exec(ctx, e.d.sql("InboxForget"), c.Name, w.d.Topic, w.d.ID); err != nil {
				return fmt.Errorf("taking back the inbox row of failed event %s/%s: %w", w.d.Topic, w.d.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Logger.Debug("keelevents: batch failed, handling its events one by one", "consumer", c.Name,
				"events", len(first), "err", err)
		}
		for _, w := range first {
			if w == lone {
				answer(w, func() error { return c.failed(ctx, w.d, w.digest, loneErr) })
				continue
			}
			one(w)
		}
	} else {
		var nApplied, nDup int
		for i, w := range first {
			if ferr, ok := partial[w]; ok {
				w.done <- c.failed(ctx, w.d, w.digest, ferr)
				continue
			}
			switch outs[i] {
			case applied:
				nApplied++
			case duplicate:
				nDup++
			}
			w.done <- nil
		}
		e.m.applied.WithLabelValues(c.Name).Add(float64(nApplied))
		e.m.duplicates.WithLabelValues(c.Name).Add(float64(nDup))
	}
	for _, w := range again {
		one(w)
	}
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
