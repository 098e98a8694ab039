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

// outboxRow is a notice or an availability event to write in the current
// transaction.
type outboxRow struct {
	kind          string
	reservationID int64
	version       int64
	slotID        int64
	userID        string
	payload       map[string]any
	deliverAt     time.Time
}

// notifyMaxAttempts bounds a notification's delivery attempts (the
// notifier consumer's budget); after them the event is manual in the
// events console, where an operator can replay it.
const notifyMaxAttempts = 10

// NotificationTopic is the topic of notification events in the engine's
// events outbox; the module's consumer NotifierConsumer delivers them.
const NotificationTopic = "reservation.notification"

// writeOutbox writes rows in the caller's transaction: availability events
// to the events outbox, notices as rows of rsv_notification (their record)
// handed over at once (see handOver). Nothing is written without its
// delivery following when the transaction commits.
func (m *Module[TTx]) writeOutbox(ctx context.Context, tx keelsql.Tx[TTx], now time.Time, rows []outboxRow) error {
	rows, err := m.emitAvailability(ctx, tx, rows)
	if err != nil || len(rows) == 0 {
		return err
	}
	n := len(rows)
	b := noticeRows{kinds: make([]string, n), users: make([]string, n), payloads: make([]string, n),
		ids: make([]int64, n), versions: make([]int64, n), slots: make([]int64, n), at: make([]time.Time, n)}
	for i, r := range rows {
		b.kinds[i], b.users[i], b.ids[i], b.versions[i], b.slots[i] = r.kind, r.userID, r.reservationID, r.version, r.slotID
		p, err := json.Marshal(r.payload)
		if err != nil {
			return fmt.Errorf("encoding %s payload: %w", r.kind, err)
		}
		b.payloads[i] = string(p)
		b.at[i] = r.deliverAt
		if b.at[i].IsZero() {
			b.at[i] = now
		}
	}
	written, err := m.st.insertNotices(ctx, tx, b, now)
	if err != nil {
		return fmt.Errorf("writing %d notifications: %w", n, err)
	}
	return m.handOver(ctx, tx, now, written)
}

// AvailabilityTopic is the topic of availability events in the engine's
// events outbox (Host.Events).
const AvailabilityTopic = "reservation.availability"

// emitAvailability writes the availability events among rows to the
// events outbox, in tx, and returns the other rows (notices). An event's id is the next number of rsv_event_seq,
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
		n, err := m.st.nextEventSeq(ctx, tx)
		if err != nil {
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

// handOver hands notices to their delivery, in tx. A notice due now is an
// event (NotificationTopic) in the events outbox: the relay publishes it
// and the notifier consumer sends it. A notice due later (a reminder) is a
// scheduled engine job (kind reservation.notify, key "notify:<row>") that
// emits the event when due. The events outbox is for facts to publish now,
// in emit order: a row held back until its time would sit in the relay's
// ordered scan and hold back its partition, or need the relay to honour a
// not-before it has no index for, while the engine's scheduled jobs are
// durable timers already (indexed by run time, retried, visible, and
// rescheduled by the move that replaces a reminder).
func (m *Module[TTx]) handOver(ctx context.Context, tx keelsql.Tx[TTx], now time.Time, refs []outboxRef) error {
	var later []keel.InsertParams
	var events []keelevents.Event
	for _, o := range refs {
		if o.deliverAt.After(now) {
			later = append(later, keel.InsertParams{Args: NotifyArgs{OutboxID: o.id}, Opts: &keel.InsertOpts{
				Queue: m.set.queue, IdempotencyKey: fmt.Sprintf("notify:%d", o.id), RunAt: o.deliverAt,
				MaxAttempts: notifyMaxAttempts}})
			continue
		}
		events = append(events, notificationEvent(o))
	}
	for len(events) > 0 {
		n := min(len(events), keelevents.MaxEmitMany)
		if err := m.h.Events.EmitManyTx(ctx, tx, events[:n]); err != nil {
			return fmt.Errorf("emitting %d notifications: %w", n, err)
		}
		events = events[n:]
	}
	if len(later) == 0 {
		return nil
	}
	client, err := m.engine()
	if err != nil {
		return err
	}
	if _, err := client.InsertManyTx(ctx, tx.Native(), later); err != nil {
		return fmt.Errorf("scheduling %d reminders: %w", len(later), err)
	}
	return nil
}

// notificationEvent is the event of a notice. Its id names the notice
// (its row), so a second emit (a reminder job retried, a hand-over
// repeated) is absorbed by the outbox, and the notifier's inbox applies it
// once; its key is the notice too: notices are independent, and one whose
// delivery is retried must not hold back others.
func notificationEvent(o outboxRef) keelevents.Event {
	payload, _ := json.Marshal(notificationBody{Notification: o.id, Kind: o.kind})
	return keelevents.Event{Topic: NotificationTopic, ID: fmt.Sprintf("rsv-notify:%d", o.id),
		Key: fmt.Sprintf("notification:%d", o.id), Type: o.kind, Payload: payload}
}

// notificationBody is the payload of a notification event: the notice's
// row, which holds its text data, and its kind.
type notificationBody struct {
	Notification int64  `json:"notification_id"`
	Kind         string `json:"kind"`
}

type outboxRef struct {
	id        int64
	kind      string
	deliverAt time.Time
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
