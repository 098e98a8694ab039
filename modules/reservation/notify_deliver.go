package reservation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
)

// pendingNotification is a notification with its reservation's current
// state and version.
type pendingNotification struct {
	Notification
	resState   State
	resVersion int64
}

// NotifierConsumer is the durable name of the module's consumer of
// notification events, which sends each notice through the Channel.
const NotifierConsumer = "reservation-notifier"

func (m *Module[TTx]) notificationGet(ctx context.Context, tx keelsql.Tx[TTx], id int64) (*pendingNotification, error) {
	return m.st.notification(ctx, tx, id)
}

// workNotify runs when a reminder is due: it emits the reminder's event,
// in one transaction with the job's completion (a retried job emits the
// same id again, which the outbox absorbs). Whether the reminder still
// applies is the notifier's decision when it handles the event.
func (m *Module[TTx]) workNotify(ctx context.Context, job *keel.Job[NotifyArgs]) error {
	m.bind(ctx)
	client, err := m.engine()
	if err != nil {
		return err
	}
	return m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		n, err := m.notificationGet(ctx, tx, job.Args.OutboxID)
		if err == nil && n.State == "pending" {
			err = m.h.Events.EmitTx(ctx, tx, notificationEvent(outboxRef{id: n.ID, kind: n.Kind}))
		} else if errors.Is(err, keeltype.ErrNotFound) {
			err = nil // pruned
		}
		if err != nil {
			return fmt.Errorf("emitting notification %d: %w", job.Args.OutboxID, err)
		}
		return client.CompleteTx(ctx, tx.Native(), job, map[string]any{"outcome": "emitted"})
	})
}

// notifierConsumer delivers notification events. It runs in the inbox
// transaction, so a notice's final state commits with its inbox row (one
// effect per event id). A notice describes its reservation at one version;
// when the reservation has moved on (checked in, cancelled, moved,
// restored) it is skipped instead, which is how a reminder is dropped after
// check-in and replaced after a move. The send happens before that commit:
// a notifier killed after sending and before committing sends again on
// redelivery with the same Message.Key, which the counterpart uses to drop
// the repeat (Channel's contract). A failed send is redelivered with the
// consumer's backoff; a rejection is final (failed); past
// notifyMaxAttempts the event is manual, replayable from the events
// console. Failures never touch the reservation.
//
// The notices that arrive together share one transaction (a release
// scan's hand over is thousands at once): a commit per notice made the
// notifier, not the release, the cost of a large scan. Their sends run
// side by side, as they did one per delivery, and a failed send is
// reported for its notice alone (keelevents.BatchErrors), so the others of
// its batch commit and are not sent again.
func (m *Module[TTx]) notifierConsumer() keelevents.Consumer[TTx] {
	return keelevents.Consumer[TTx]{
		Name: NotifierConsumer, Topics: []string{NotificationTopic}, MaxAttempts: notifyMaxAttempts,
		Backoff: m.opt.notifyBackoff, Batch: notifyBatch,
		HandleBatch: func(ctx context.Context, tx keelsql.Tx[TTx], ds []*keelevents.Delivery) error {
			m.bind(ctx)
			return m.deliver(ctx, tx, ds)
		},
	}
}

// notifyBatch bounds the notices of one notifier transaction and
// notifySendsAtOnce the sends in flight within it (the in-database bus's
// default of handler calls in flight, which is how many ran at once when
// each notice had its own transaction).
const (
	notifyBatch       = 100
	notifySendsAtOnce = 32
)

// deliver handles a batch of notification events in tx: reads each
// notice, skips the stale ones, sends the rest side by side and records
// each outcome. A send's failure is its event's alone; a failed statement
// fails the batch, whose events are then handled again one by one.
func (m *Module[TTx]) deliver(ctx context.Context, tx keelsql.Tx[TTx], ds []*keelevents.Delivery) error {
	errs := make(keelevents.BatchErrors, len(ds))
	type sending struct {
		i   int
		n   *pendingNotification
		err error
	}
	var out []*sending
	for i, d := range ds {
		var body notificationBody
		if err := json.Unmarshal(d.Payload, &body); err != nil || body.Notification <= 0 {
			errs[i] = fmt.Errorf("notification event %s: no notification id", d.ID)
			continue
		}
		n, err := m.notificationGet(ctx, tx, body.Notification)
		if errors.Is(err, keeltype.ErrNotFound) || (err == nil && n.State != "pending") {
			continue // pruned or already finished
		}
		if err != nil {
			return err
		}
		if n.Reservation != 0 && n.resVersion != n.Version {
			why := fmt.Sprintf("reservation is now %s (version %d)", n.resState, n.resVersion)
			if err := m.finishNotification(ctx, tx, n, "skipped", 0, why); err != nil {
				return err
			}
			continue
		}
		out = append(out, &sending{i: i, n: n})
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, notifySendsAtOnce)
	for _, s := range out {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			// A channel that panics fails its notice, as it did when the
			// send ran on the consumer's own goroutine (keelevents turns a
			// handler's panic into an error); here it would end the process.
			defer func() {
				if r := recover(); r != nil {
					s.err = fmt.Errorf("channel %s panicked: %v", m.opt.channel.Name(), r)
				}
			}()
			s.err = m.opt.channel.Send(ctx, m.message(s.n))
		})
	}
	wg.Wait()
	for _, s := range out {
		n, attempt := s.n, ds[s.i].Attempt
		var err error
		switch {
		case s.err == nil:
			err = m.finishNotification(ctx, tx, n, "sent", attempt, "")
		case errors.Is(s.err, ErrRejected):
			m.met.notifications.WithLabelValues(n.Kind, "failed").Inc()
			msg := s.err.Error()
			if len(msg) > maxErrorText {
				msg = msg[:maxErrorText]
			}
			err = m.finishNotification(ctx, tx, n, "failed", attempt, msg)
		default:
			m.met.notifications.WithLabelValues(n.Kind, "failed").Inc()
			errs[s.i] = fmt.Errorf("delivering notification %d: %w", n.ID, s.err)
		}
		if err != nil {
			return err
		}
	}
	if slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		return errs
	}
	return nil
}

func (m *Module[TTx]) finishNotification(ctx context.Context, tx keelsql.Tx[TTx], n *pendingNotification, state string, attempts int, why string) error {
	var sent *time.Time
	if state == "sent" {
		now := m.now()
		sent = &now
	}
	if err := m.st.finishNotification(ctx, tx, n.ID, state, attempts, sent, why); err != nil {
		return fmt.Errorf("marking notification %d %s: %w", n.ID, state, err)
	}
	if state != "failed" {
		m.met.notifications.WithLabelValues(n.Kind, state).Inc()
	}
	return nil
}

// message renders a notification in both languages, times in the business
// zone.
func (m *Module[TTx]) message(n *pendingNotification) Message {
	var data map[string]string
	_ = json.Unmarshal(n.Payload, &data)
	at := func(key string) string {
		t, err := time.Parse(time.RFC3339, data[key])
		if err != nil {
			return "—"
		}
		return t.In(m.set.zone).Format("01-02 15:04")
	}
	msg := Message{ID: n.ID, Key: fmt.Sprintf("rsv-notify-%d", n.ID), Kind: n.Kind, UserID: n.UserID,
		ReservationID: n.Reservation, Data: n.Payload}
	switch n.Kind {
	case kindReminder:
		msg.TextZH = fmt.Sprintf("您的预约 #%d 将于 %s 因未签到而释放，请尽快到店签到。", n.Reservation, at("release_at"))
		msg.TextEN = fmt.Sprintf("Reservation #%d will be released at %s unless you check in.", n.Reservation, at("release_at"))
	case kindRelease:
		msg.TextZH = fmt.Sprintf("您的预约 #%d 因超时未签到已释放；如已到店，可在 %s 前申诉恢复。", n.Reservation, at("appeal_until"))
		msg.TextEN = fmt.Sprintf("Reservation #%d was released: no check-in by its release point. Appeal by %s if you are here.", n.Reservation, at("appeal_until"))
	case kindOffer:
		msg.TextZH = fmt.Sprintf("候补成功：已为您保留名额（预约 #%d），请在 %s 前完成支付。", n.Reservation, at("hold_expires_at"))
		msg.TextEN = fmt.Sprintf("A place is yours (reservation #%d): pay by %s to keep it.", n.Reservation, at("hold_expires_at"))
	case kindOfferLapsed:
		msg.TextZH = fmt.Sprintf("候补名额（预约 #%d）保留已到期，名额已转给下一位。", n.Reservation)
		msg.TextEN = fmt.Sprintf("The place held for you (reservation #%d) lapsed unpaid and went to the next in line.", n.Reservation)
	case kindRestore:
		msg.TextZH = fmt.Sprintf("您的预约 #%d 已恢复，请尽快签到。", n.Reservation)
		msg.TextEN = fmt.Sprintf("Reservation #%d was restored; please check in.", n.Reservation)
	}
	return msg
}
