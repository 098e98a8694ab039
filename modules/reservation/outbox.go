package reservation

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
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
	rows, err := m.emitAvailability(ctx, tx, rows)
	if err != nil || len(rows) == 0 {
		return err
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
	return m.queueDeliveries(ctx, tx, now, written)
}

// AvailabilityTopic is the topic of availability events in the engine's
// events outbox (Host.Events).
const AvailabilityTopic = "reservation.availability"

// emitAvailability writes the availability events among rows to the
// events outbox, in tx, and returns the other rows (notifications, for the
// module's own outbox). An event's id is the next number of rsv_event_seq,
// drawn in the transaction that changed the counts; its key is its first
// slot, so one slot's events are published and consumed in order.
func (m *Module[TTx]) emitAvailability(ctx context.Context, tx keelsql.Tx[TTx], rows []outboxRow) ([]outboxRow, error) {
	rest := rows[:0:0]
	for _, r := range rows {
		if r.kind != kindAvailability {
			rest = append(rest, r)
			continue
		}
		slots, _ := r.payload["slots"].([]SlotAvailability)
		if len(slots) == 0 {
			continue
		}
		var n int64
		if err := tx.QueryRow(ctx, m.sql("EventSeqNext")).Scan(&n); err != nil {
			return nil, fmt.Errorf("numbering an availability event: %w", err)
		}
		payload, err := json.Marshal(r.payload)
		if err != nil {
			return nil, fmt.Errorf("encoding an availability event: %w", err)
		}
		err = m.h.Events.EmitTx(ctx, tx, keelevents.Event{Topic: AvailabilityTopic, ID: fmt.Sprintf("rsv-availability:%d", n),
			Key: fmt.Sprintf("slot:%d", slots[0].SlotID), Payload: payload})
		if err != nil {
			return nil, fmt.Errorf("emitting an availability event: %w", err)
		}
	}
	return rest, nil
}

// queueDeliveries queues, in tx, the delivery job of each notification
// among refs.
func (m *Module[TTx]) queueDeliveries(ctx context.Context, tx keelsql.Tx[TTx], now time.Time, refs []outboxRef) error {
	client, err := m.engine()
	if err != nil {
		return err
	}
	jobs := m.deliveryJobs(now, refs)
	if len(jobs) == 0 {
		return nil
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
