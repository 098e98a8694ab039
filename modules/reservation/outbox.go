package reservation

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
)

// Outbox kinds.
const (
	kindReminder     = "reminder"
	kindRelease      = "release"
	kindOffer        = "offer"
	kindOfferLapsed  = "offer_lapsed"
	kindRestore      = "restore"
	kindAvailability = "availability"
)

// outboxRow is a row to write in the current transaction.
type outboxRow struct {
	kind          string
	reservationID int64
	version       int64
	slotID        int64
	userID        string
	payload       map[string]any
	deliverAt     time.Time
}

// notifyMaxAttempts bounds a notification's delivery attempts; after them
// the engine parks the job as manual and the row is marked failed.
const notifyMaxAttempts = 10

// writeOutbox inserts rows in the caller's transaction. With direct, the
// delivery job of each notification (idempotency key "notify:<row id>")
// and a relay job for availability events are queued in the same
// transaction; without, the rows wait for the relay job the caller queues
// once its transactions are done (the scan's many small transactions stay
// short). Either way nothing is written without its delivery following.
func (m *Module[TTx]) writeOutbox(ctx context.Context, tx keelsql.Tx[TTx], now time.Time, rows []outboxRow, direct bool) error {
	if len(rows) == 0 {
		return nil
	}
	n := len(rows)
	kinds, users, payloads := make([]string, n), make([]string, n), make([]string, n)
	ids, versions, slots := make([]int64, n), make([]int64, n), make([]int64, n)
	at := make([]time.Time, n)
	for i, r := range rows {
		kinds[i], users[i], ids[i], versions[i], slots[i] = r.kind, r.userID, r.reservationID, r.version, r.slotID
		b, err := json.Marshal(r.payload)
		if err != nil {
			return fmt.Errorf("encoding %s payload: %w", r.kind, err)
		}
		payloads[i] = string(b)
		at[i] = r.deliverAt
		if at[i].IsZero() {
			at[i] = now
		}
	}
	q, err := tx.Query(ctx, m.sql("OutboxInsertMany"), m.strs(kinds), m.int64s(ids), m.int64s(versions),
		m.int64s(slots), m.strs(users), m.strs(payloads), m.times(at), now, direct)
	written, err := scanOutboxRefs(q, err)
	if err != nil {
		return fmt.Errorf("writing %d outbox rows: %w", n, err)
	}
	if !direct {
		return nil
	}
	return m.queueDeliveries(ctx, tx, now, written, hasEvents(written))
}

// queueDeliveries queues, in tx, the delivery job of each notification
// among refs and, with relay, a relay job for availability events: one per
// instance and second, so events committed after it ran go with the next
// relay (every scan queues one).
func (m *Module[TTx]) queueDeliveries(ctx context.Context, tx keelsql.Tx[TTx], now time.Time, refs []outboxRef, relay bool) error {
	client, err := m.engine()
	if err != nil {
		return err
	}
	jobs := m.deliveryJobs(now, refs)
	if relay {
		sec := now.Truncate(time.Second)
		jobs = append(jobs, keel.InsertParams{Args: RelayArgs{}, Opts: &keel.InsertOpts{Queue: m.set.queue,
			IdempotencyKey: fmt.Sprintf("relay:%s:%d", client.ID(), sec.Unix()), RunAt: sec.Add(time.Second)}})
	}
	if _, err := client.InsertManyTx(ctx, tx.Native(), jobs); err != nil {
		return fmt.Errorf("queueing %d deliveries: %w", len(jobs), err)
	}
	return nil
}

type outboxRef struct {
	id        int64
	kind      string
	deliverAt time.Time
}

func scanOutboxRefs(rows keelsql.Rows, err error) ([]outboxRef, error) {
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (outboxRef, error) {
		var o outboxRef
		return o, r.Scan(&o.id, &o.kind, &o.deliverAt)
	})
}

func hasEvents(refs []outboxRef) bool {
	for _, o := range refs {
		if o.kind == kindAvailability {
			return true
		}
	}
	return false
}

// deliveryJobs are the delivery jobs of the notifications among refs, each
// scheduled at its delivery time.
func (m *Module[TTx]) deliveryJobs(now time.Time, refs []outboxRef) []keel.InsertParams {
	jobs := make([]keel.InsertParams, 0, len(refs)+1)
	for _, o := range refs {
		if o.kind == kindAvailability {
			continue
		}
		opts := &keel.InsertOpts{Queue: m.set.queue, IdempotencyKey: fmt.Sprintf("notify:%d", o.id),
			MaxAttempts: notifyMaxAttempts}
		if o.deliverAt.After(now) {
			opts.RunAt = o.deliverAt
		}
		jobs = append(jobs, keel.InsertParams{Args: NotifyArgs{OutboxID: o.id}, Opts: opts})
	}
	return jobs
}

// queueRelay queues a relay job after a run (key "relay:<tag>").
func (m *Module[TTx]) queueRelay(ctx context.Context, tag string) error {
	client, err := m.engine()
	if err != nil {
		return err
	}
	_, err = client.Insert(ctx, RelayArgs{}, &keel.InsertOpts{Queue: m.set.queue, IdempotencyKey: "relay:" + tag})
	return wrapf(err, "queueing the relay")
}

// SlotAvailability is one slot's counts in an availability event.
type SlotAvailability struct {
	SlotID    int64 `json:"slot_id"`
	Capacity  int   `json:"capacity"`
	Held      int   `json:"held"`
	Available int   `json:"available"`
}

// availabilityRow is the event telling caches and pages that the capacity
// of these slots changed (one event per transaction).
func availabilityRow(slots []*slotState, now time.Time) outboxRow {
	list := make([]SlotAvailability, len(slots))
	for i, s := range slots {
		list[i] = SlotAvailability{SlotID: s.ID, Capacity: s.Capacity, Held: s.Held, Available: s.Capacity - s.Held}
	}
	return outboxRow{kind: kindAvailability, deliverAt: now, payload: map[string]any{"slots": list}}
}
