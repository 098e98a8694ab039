package reservation

import (
	"context"
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

// relay queues the delivery jobs of notifications written by scans, in
// batches, each batch in one transaction with its bookkeeping. (Events for
// other systems go through the engine's events outbox, not this job.)
func (m *Module[TTx]) relay(ctx context.Context) error {
	for range 20 {
		queued, err := m.dispatchOnce(ctx)
		if err != nil {
			return fmt.Errorf("queueing notifications: %w", err)
		}
		if queued < relayBatch {
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
