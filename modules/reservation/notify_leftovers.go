package reservation

import (
	"context"
	"fmt"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
)

// leftoverBatch bounds the notices one hand-over transaction takes.
const leftoverBatch = 500

// workRelay hands over leftover notices. Notices no longer wait for a
// relay (they go to the events outbox in their own transaction); the kind
// stays registered so that a relay job queued before the upgrade still
// finds a worker, and it does the one thing left to do.
func (m *Module[TTx]) workRelay(ctx context.Context, job *keel.Job[RelayArgs]) error {
	m.bind(ctx)
	return m.handOverLeftovers(ctx)
}

// handOverLeftovers hands over the notices written before notifications
// moved to the events outbox and still waiting for the old relay (handed_at
// empty, see migration 003): each in a transaction with its mark, so a
// crash halfway hands over the rest next time and an event emitted twice
// is absorbed by its id. With none left it is one indexed read.
func (m *Module[TTx]) handOverLeftovers(ctx context.Context) error {
	for {
		n, err := m.handOverOnce(ctx)
		if err != nil {
			return fmt.Errorf("handing over leftover notifications: %w", err)
		}
		if n < leftoverBatch {
			return nil
		}
	}
}

func (m *Module[TTx]) handOverOnce(ctx context.Context) (int, error) {
	var n int
	err := m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		refs, err := m.st.leftoverNotices(ctx, tx, leftoverBatch)
		if err != nil || len(refs) == 0 {
			return err
		}
		now := m.now()
		if err := m.handOver(ctx, tx, now, refs); err != nil {
			return err
		}
		ids := make([]int64, len(refs))
		for i, o := range refs {
			ids[i] = o.id
		}
		n = len(refs)
		return m.st.markHanded(ctx, tx, ids, now)
	})
	return n, err
}
