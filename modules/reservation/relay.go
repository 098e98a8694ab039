package reservation

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
)

// relayBatch bounds the rows one relay transaction handles.
const relayBatch = 500

// workRelay runs the relay.
func (m *Module[TTx]) workRelay(ctx context.Context, job *keel.Job[RelayArgs]) error {
	m.bind(ctx)
	return m.relay(ctx)
}

// relay queues the delivery jobs of notifications written by scans and
// hands pending availability events to the publisher, in batches, each
// batch in one transaction with its bookkeeping.
func (m *Module[TTx]) relay(ctx context.Context) error {
	for range 20 {
		queued, err := m.dispatchOnce(ctx)
		if err != nil {
			return fmt.Errorf("queueing notifications: %w", err)
		}
		published, err := m.publishOnce(ctx)
		if err != nil {
			return fmt.Errorf("relaying availability events: %w", err)
		}
		if queued < relayBatch && published < relayBatch {
			return nil
		}
	}
	return nil
}

func (m *Module[TTx]) dispatchOnce(ctx context.Context) (int, error) {
	client, err := m.engine()
	if err != nil {
		return 0, err
	}
	var n int
	err = m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		rows, err := tx.Query(ctx, m.sql("OutboxNotesClaim"), relayBatch)
		refs, err := scanOutboxRefs(rows, err)
		if err != nil || len(refs) == 0 {
			return err
		}
		now := m.now()
		if _, err := client.InsertManyTx(ctx, tx.Native(), m.deliveryJobs(now, refs)); err != nil {
			return err
		}
		ids := make([]int64, len(refs))
		for i, o := range refs {
			ids[i] = o.id
		}
		n = len(refs)
		_, err = tx.Exec(ctx, m.sql("OutboxNotesQueued"), m.int64s(ids), now)
		return err
	})
	return n, err
}

func (m *Module[TTx]) publishOnce(ctx context.Context) (int, error) {
	var n int
	err := m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		rows, err := tx.Query(ctx, m.sql("OutboxEventsClaim"), relayBatch)
		events, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Event, error) {
			var e Event
			var payload string
			if err := r.Scan(&e.ID, &payload, &e.At); err != nil {
				return e, err
			}
			var body struct {
				Slots []SlotAvailability `json:"slots"`
			}
			if err := json.Unmarshal([]byte(payload), &body); err != nil {
				return e, fmt.Errorf("event %d: %w", e.ID, err)
			}
			e.Slots = body.Slots
			return e, nil
		})
		if err != nil || len(events) == 0 {
			return err
		}
		if err := m.opt.publisher.Publish(ctx, events); err != nil {
			return fmt.Errorf("publishing %d events: %w", len(events), err)
		}
		ids := make([]int64, len(events))
		for i, e := range events {
			ids[i] = e.ID
		}
		n = len(events)
		_, err = tx.Exec(ctx, m.sql("OutboxEventsSent"), m.int64s(ids), m.now())
		return err
	})
	return n, err
}
