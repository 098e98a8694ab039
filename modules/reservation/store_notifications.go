package reservation

import (
	"context"
	"encoding/json"
	"time"

	"github.com/keelwork/keel/keelsql"
)

// noticeRows is a batch of notices to write, one per index.
type noticeRows struct {
	kinds, users, payloads []string
	ids, versions, slots   []int64
	at                     []time.Time
}

// insertNotices writes notice rows and returns what delivery needs of each.
func (s *store[TTx]) insertNotices(ctx context.Context, tx keelsql.Querier, n noticeRows, now time.Time) ([]outboxRef, error) {
	rows, err := tx.Query(ctx, s.sql("NotificationInsertMany"), strs(n.kinds), int64s(n.ids), int64s(n.versions),
		int64s(n.slots), strs(n.users), strs(n.payloads), times(n.at), now)
	return scanOutboxRefs(rows, err)
}

func scanOutboxRefs(rows keelsql.Rows, err error) ([]outboxRef, error) {
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (outboxRef, error) {
		var o outboxRef
		return o, r.Scan(&o.id, &o.kind, &o.deliverAt)
	})
}

// nextEventSeq draws the next number of rsv_event_seq.
func (s *store[TTx]) nextEventSeq(ctx context.Context, tx keelsql.Querier) (int64, error) {
	return one[int64](tx.QueryRow(ctx, s.sql("EventSeqNext")))
}

// notification reads a notice with its reservation's current state and
// version; keeltype.ErrNotFound when it was pruned.
func (s *store[TTx]) notification(ctx context.Context, tx keelsql.Querier, id int64) (*pendingNotification, error) {
	n := &pendingNotification{}
	var payload, state string
	err := tx.QueryRow(ctx, s.sql("NotificationGet"), id).Scan(&n.ID, &n.Kind, &n.UserID, &n.State, &payload,
		&n.DeliverAt, &n.Attempts, &n.LastError, &n.SentAt, &n.Reservation, &n.Version, &state, &n.resVersion)
	if err != nil {
		return nil, notFound(err)
	}
	n.Payload, n.resState = json.RawMessage(payload), State(state)
	return n, nil
}

// finishNotification records a notice's outcome.
func (s *store[TTx]) finishNotification(ctx context.Context, tx keelsql.Querier, id int64, state string, attempts int, sent *time.Time, why string) error {
	_, err := tx.Exec(ctx, s.sql("NotificationFinish"), id, state, attempts, sent, why)
	return err
}

// notifications lists a reservation's notices, oldest first.
func (s *store[TTx]) notifications(ctx context.Context, reservation int64) ([]Notification, error) {
	rows, err := s.db.Query(ctx, s.sql("NotificationList"), reservation)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Notification, error) {
		var n Notification
		var payload string
		err := r.Scan(&n.ID, &n.Kind, &n.UserID, &n.State, &payload, &n.DeliverAt, &n.Attempts, &n.LastError,
			&n.SentAt, &n.Reservation, &n.Version)
		n.Payload = []byte(payload)
		return n, err
	})
}

// pruneNotifications deletes up to limit delivered notices older than before.
func (s *store[TTx]) pruneNotifications(ctx context.Context, before time.Time, limit int) error {
	_, err := s.db.Exec(ctx, s.sql("NotificationPrune"), before, limit)
	return err
}

// leftoverNotices lists up to limit notices written before notifications
// went to the events outbox and not handed over yet.
func (s *store[TTx]) leftoverNotices(ctx context.Context, tx keelsql.Querier, limit int) ([]outboxRef, error) {
	rows, err := tx.Query(ctx, s.sql("NotificationLeftovers"), limit)
	return scanOutboxRefs(rows, err)
}

// markHanded records that the notices were handed over.
func (s *store[TTx]) markHanded(ctx context.Context, tx keelsql.Querier, ids []int64, now time.Time) error {
	_, err := tx.Exec(ctx, s.sql("NotificationHanded"), int64s(ids), now)
	return err
}
