package reservation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
)

// pendingNotification is an outbox row with its reservation's current
// state and version.
type pendingNotification struct {
	Notification
	resState   State
	resVersion int64
}

func (m *Module[TTx]) outboxGet(ctx context.Context, id int64) (*pendingNotification, error) {
	n := &pendingNotification{}
	var payload, state string
	err := m.db.QueryRow(ctx, m.sql("OutboxGet"), id).Scan(&n.ID, &n.Kind, &n.UserID, &n.State, &payload,
		&n.DeliverAt, &n.Attempts, &n.LastError, &n.SentAt, &n.Reservation, &n.Version, &state, &n.resVersion)
	if err != nil {
		return nil, notFound(err)
	}
	n.Payload, n.resState = json.RawMessage(payload), State(state)
	return n, nil
}

// workNotify delivers one notification. A notification describes its
// reservation at one version; when the reservation has moved on (checked
// in, cancelled, moved, restored) it is skipped instead, which is how a
// reminder is dropped after check-in and replaced after a move. Success is
// recorded in the job's completion transaction; failures retry with the
// engine's backoff and never touch the reservation.
func (m *Module[TTx]) workNotify(ctx context.Context, job *keel.Job[NotifyArgs]) error {
	m.bind(ctx)
	n, err := m.outboxGet(ctx, job.Args.OutboxID)
	if errors.Is(err, keeltype.ErrNotFound) || (err == nil && n.State != "pending") {
		return nil // pruned or already finished
	}
	if err != nil {
		return err
	}
	if n.Reservation != 0 && n.resVersion != n.Version {
		return m.finishNotification(ctx, job, n, "skipped", fmt.Sprintf("reservation is now %s (version %d)", n.resState, n.resVersion))
	}
	msg := m.message(n)
	if err := m.opt.channel.Send(ctx, msg); err != nil {
		return m.deliveryFailed(ctx, job, n, err)
	}
	return m.finishNotification(ctx, job, n, "sent", "")
}

func (m *Module[TTx]) finishNotification(ctx context.Context, job *keel.Job[NotifyArgs], n *pendingNotification, state, why string) error {
	client, err := m.engine()
	if err != nil {
		return err
	}
	var sent *time.Time
	attempts := 0
	if state == "sent" {
		now := m.now()
		sent, attempts = &now, 1
	}
	err = m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		if _, err := tx.Exec(ctx, m.sql("OutboxFinish"), n.ID, state, attempts, sent, why); err != nil {
			return fmt.Errorf("marking notification %d %s: %w", n.ID, state, err)
		}
		return client.CompleteTx(ctx, tx.Native(), job, map[string]any{"outcome": state})
	})
	if err != nil {
		return err
	}
	m.met.notifications.WithLabelValues(n.Kind, state).Inc()
	return nil
}

// deliveryFailed records a failed attempt; a rejection or the last attempt
// marks the notification failed.
func (m *Module[TTx]) deliveryFailed(ctx context.Context, job *keel.Job[NotifyArgs], n *pendingNotification, cause error) error {
	msg := cause.Error()
	if len(msg) > maxErrorText {
		msg = msg[:maxErrorText]
	}
	final := errors.Is(cause, ErrRejected) || job.Attempt >= job.MaxAttempts
	var err error
	if final {
		_, err = m.db.Exec(ctx, m.sql("OutboxFinish"), n.ID, "failed", 1, nil, msg)
	} else {
		_, err = m.db.Exec(ctx, m.sql("OutboxAttemptFailed"), n.ID, msg)
	}
	if err != nil {
		m.log.Warn("reservation: recording a failed delivery", "notification", n.ID, "error", err)
	}
	m.met.notifications.WithLabelValues(n.Kind, "failed").Inc()
	if errors.Is(cause, ErrRejected) {
		return keel.JobPermanent(cause)
	}
	return fmt.Errorf("delivering notification %d: %w", n.ID, cause)
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
