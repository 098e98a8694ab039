package reservation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
// transaction, so the notice's final state commits with the inbox row
// (one effect per event id). A notice describes its reservation at one
// version; when the reservation has moved on (checked in, cancelled,
// moved, restored) it is skipped instead, which is how a reminder is
// dropped after check-in and replaced after a move. The send happens before
// that commit: a notifier killed after sending and before committing sends
// again on redelivery with the same Message.Key, which the counterpart
// uses to drop the repeat (Channel's contract). A failed send rolls back
// and is redelivered with the consumer's backoff; a rejection is final
// (failed); past notifyMaxAttempts the event is manual, replayable from
// the events console. Failures never touch the reservation.
func (m *Module[TTx]) notifierConsumer() keelevents.Consumer[TTx] {
	return keelevents.Consumer[TTx]{
		Name: NotifierConsumer, Topics: []string{NotificationTopic}, MaxAttempts: notifyMaxAttempts,
		Backoff: m.opt.notifyBackoff,
		Handle: func(ctx context.Context, tx keelsql.Tx[TTx], d *keelevents.Delivery) error {
			m.bind(ctx)
			var body notificationBody
			if err := json.Unmarshal(d.Payload, &body); err != nil || body.Notification <= 0 {
				return fmt.Errorf("notification event %s: no notification id", d.ID)
			}
			return m.deliver(ctx, tx, body.Notification, d.Attempt)
		},
	}
}

func (m *Module[TTx]) deliver(ctx context.Context, tx keelsql.Tx[TTx], id int64, attempt int) error {
	n, err := m.notificationGet(ctx, tx, id)
	if errors.Is(err, keeltype.ErrNotFound) || (err == nil && n.State != "pending") {
		return nil // pruned or already finished
	}
	if err != nil {
		return err
	}
	if n.Reservation != 0 && n.resVersion != n.Version {
		return m.finishNotification(ctx, tx, n, "skipped", 0, fmt.Sprintf("reservation is now %s (version %d)", n.resState, n.resVersion))
	}
	if err := m.opt.channel.Send(ctx, m.message(n)); err != nil {
		m.met.notifications.WithLabelValues(n.Kind, "failed").Inc()
		if errors.Is(err, ErrRejected) {
			msg := err.Error()
			if len(msg) > maxErrorText {
				msg = msg[:maxErrorText]
			}
			return m.finishNotification(ctx, tx, n, "failed", attempt, msg)
		}
		return fmt.Errorf("delivering notification %d: %w", n.ID, err)
	}
	return m.finishNotification(ctx, tx, n, "sent", attempt, "")
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
