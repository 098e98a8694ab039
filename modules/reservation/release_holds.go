package reservation

import (
	"context"
	"fmt"

	"github.com/keelwork/keel/keelsql"
)

// expireHolds ends unpaid bookings and waitlist offers whose hold lapsed,
// returning their places (and offering them to the next waitlisted users),
// within one page per scan.
func (m *Module[TTx]) expireHolds(ctx context.Context, p *pass, run *Run) error {
	for done := 0; done < m.set.pageSize; {
		n := min(m.set.txSize, m.set.pageSize-done)
		var got, promoted int
		err := m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
			cands, err := m.st.claimHolds(ctx, tx, p.now, n)
			if err != nil || len(cands) == 0 {
				return err
			}
			got = len(cands)
			promoted, err = m.expireTx(ctx, tx, p, cands)
			return err
		})
		if err != nil {
			return fmt.Errorf("expiring lapsed holds: %w", err)
		}
		run.HoldsExpired += got
		run.Promoted += promoted
		m.met.holdsExpired.Add(float64(got))
		m.met.promotions.Add(float64(promoted))
		done += got
		if got < n {
			return nil
		}
	}
	return nil
}

// expireTx moves held pending_payment candidates to expired with their
// places returned, history, lapsed-offer notices and availability events.
func (m *Module[TTx]) expireTx(ctx context.Context, tx keelsql.Tx[TTx], p *pass, cands []Candidate) (int, error) {
	out := &txOutcome{}
	slots, kept, err := m.freeSlots(ctx, tx, p.now, cands, out)
	if err != nil {
		return 0, err
	}
	if len(out.failed) > 0 {
		// A hold whose place cannot be returned means the held count
		// drifted; expiring the rest would hide it. Leave all for the
		// reconciliation and say so.
		return 0, out.failed[0].err
	}
	ids, versions := make([]int64, len(kept)), make([]int64, len(kept))
	byID := make(map[int64]Candidate, len(kept))
	for i, c := range kept {
		ids[i], versions[i], byID[c.ID] = c.ID, c.Version, c
	}
	list, err := m.st.expireMany(ctx, tx, ids, versions, p.now)
	if err != nil {
		return 0, fmt.Errorf("expiring %d holds: %w", len(kept), err)
	}
	if len(list) != len(kept) {
		return 0, fmt.Errorf("expiring %d held reservations matched %d rows", len(kept), len(list))
	}
	var notices []outboxRow
	newIDs, newVersions := make([]int64, len(list)), make([]int64, len(list))
	for i, x := range list {
		newIDs[i], newVersions[i] = x.id, x.version
		if x.offer {
			c := byID[x.id]
			notices = append(notices, outboxRow{kind: kindOfferLapsed, reservationID: x.id, version: x.version,
				slotID: c.SlotID, userID: c.UserID, payload: map[string]any{}})
		}
	}
	if err := m.st.insertHistoryMany(ctx, tx, newIDs, newVersions, StatePendingPayment, StateExpired,
		p.actor, "hold lapsed unpaid", p.now); err != nil {
		return 0, fmt.Errorf("recording expiry history: %w", err)
	}
	offers, promoted, err := m.promoteAll(ctx, tx, p, slots)
	if err != nil {
		return 0, err
	}
	notices = append(notices, availabilityRow(sortedSlots(slots), p.now))
	return promoted, m.writeOutbox(ctx, tx, p.now, append(notices, offers...))
}
