package reservation

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/keelwork/keel/keelsql"
)

// txOutcome is what one release transaction did.
type txOutcome struct {
	released      []releasedRow
	failed        []failure
	restoreOK     int
	restoreFailed int
	promoted      int
}

type releasedRow struct {
	c       Candidate
	version int64
}

// batch is the result of releasing held candidates: the slots that took
// their places back, the released rows, and (PostgreSQL) the notices the
// statement wrote.
type batch struct {
	slots    map[int64]*slotState
	released []releasedRow
	notices  []outboxRow // still to write (SQLite)
	written  []outboxRef // already written (PostgreSQL)
}

// releaseTx releases claimed candidates inside tx, whose rows it holds:
// each is marked released only together with its place returned to the
// slot, its history row, its no-show record and its release notice, plus
// the slots' availability event; freed places go to the slot's waitlist
// first. A candidate whose place cannot be returned stays paid and is
// reported failed; any statement error aborts the whole transaction.
func (m *Module[TTx]) releaseTx(ctx context.Context, tx keelsql.Tx[TTx], p *pass, cands []Candidate) (*txOutcome, error) {
	out := &txOutcome{}
	if err := m.stage(ctx, "claimed", tx); err != nil {
		return nil, err
	}
	kept := m.restoreHook(ctx, cands, out)
	if len(kept) == 0 {
		out.restoreFailed = len(out.failed)
		return out, nil
	}
	var b *batch
	var err error
	if m.st.pg {
		b, err = m.releasePG(ctx, tx, p, kept)
	} else {
		b, err = m.releaseSQLite(ctx, tx, p, kept)
	}
	if err != nil {
		return nil, err
	}
	want := 0
	for _, c := range kept {
		if _, ok := b.slots[c.SlotID]; ok {
			want++
			continue
		}
		out.failed = append(out.failed, failure{c: c, restore: true,
			err: fmt.Errorf("slot %d holds fewer places than it would get back (held count drifted; reconcile it)", c.SlotID)})
	}
	if len(b.released) != want {
		return nil, fmt.Errorf("releasing %d held reservations matched %d rows", want, len(b.released))
	}
	out.released, out.restoreOK, out.restoreFailed = b.released, len(b.released), len(out.failed)
	if err := m.stage(ctx, "released", tx); err != nil {
		return nil, err
	}
	return out, m.finishRelease(ctx, tx, p, kept, b, out)
}

// restoreHook applies the fault-injection hook: candidates it fails are
// reported as failed inventory restores and left untouched.
func (m *Module[TTx]) restoreHook(ctx context.Context, cands []Candidate, out *txOutcome) []Candidate {
	if m.opt.restoreHook == nil {
		return cands
	}
	kept := make([]Candidate, 0, len(cands))
	for _, c := range cands {
		if err := m.opt.restoreHook(ctx, c); err != nil {
			out.failed = append(out.failed, failure{c: c, restore: true,
				err: fmt.Errorf("returning capacity to slot %d: %w", c.SlotID, err)})
			continue
		}
		kept = append(kept, c)
	}
	return kept
}

// finishRelease offers freed places to waitlists, writes what the release
// statement did not, queues deliveries when the path does its own, and
// applies the no-show policy.
func (m *Module[TTx]) finishRelease(ctx context.Context, tx keelsql.Tx[TTx], p *pass, kept []Candidate, b *batch, out *txOutcome) error {
	offers, promoted, err := m.promoteAll(ctx, tx, p, b.slots)
	if err != nil {
		return err
	}
	out.promoted = promoted
	if err := m.writeOutbox(ctx, tx, p.now, append(b.notices, offers...)); err != nil {
		return err
	}
	if len(b.written) > 0 { // the release statement's notices (PostgreSQL)
		if err := m.handOver(ctx, tx, p.now, b.written); err != nil {
			return err
		}
	}
	return m.applyPolicy(ctx, tx, p, usersOf(kept))
}

// releasePG does the release in one statement (see ReleaseMany).
func (m *Module[TTx]) releasePG(ctx context.Context, tx keelsql.Tx[TTx], p *pass, cands []Candidate) (*batch, error) {
	ids, versions, slots := make([]int64, len(cands)), make([]int64, len(cands)), make([]int64, len(cands))
	byID := make(map[int64]Candidate, len(cands))
	for i, c := range cands {
		ids[i], versions[i], slots[i], byID[c.ID] = c.ID, c.Version, c.SlotID, c
	}
	r, err := m.st.releaseManyPG(ctx, tx, ids, versions, slots, p.now, p.actor, releaseReason)
	if err != nil {
		return nil, fmt.Errorf("releasing %d reservations: %w", len(cands), err)
	}
	b := &batch{slots: r.slots, written: r.written}
	for _, x := range r.released {
		b.released = append(b.released, releasedRow{c: byID[x.id], version: x.version})
	}
	if len(b.slots) > 0 {
		// The statement wrote the notices; the availability event goes to
		// the events outbox through writeOutbox.
		b.notices = append(b.notices, availabilityRow(sortedSlots(b.slots), p.now))
	}
	return b, nil
}

const releaseReason = "no-show: not checked in by the release point"

// releaseSQLite does the release statement by statement (SQLite has no
// data-modifying CTEs; its single writer makes the transaction exclusive).
func (m *Module[TTx]) releaseSQLite(ctx context.Context, tx keelsql.Tx[TTx], p *pass, cands []Candidate) (*batch, error) {
	scratch := &txOutcome{}
	slots, kept, err := m.freeSlots(ctx, tx, p.now, cands, scratch)
	if err != nil {
		return nil, err
	}
	b := &batch{slots: slots}
	if len(kept) == 0 {
		return b, nil
	}
	ids, versions, users, categories := make([]int64, len(kept)), make([]int64, len(kept)), make([]string, len(kept)), make([]string, len(kept))
	byID := make(map[int64]Candidate, len(kept))
	for i, c := range kept {
		ids[i], versions[i], users[i], categories[i], byID[c.ID] = c.ID, c.Version, c.UserID, c.CategoryID, c
	}
	list, err := m.st.releaseManySQLite(ctx, tx, ids, versions, p.now)
	if err != nil {
		return nil, fmt.Errorf("releasing %d reservations: %w", len(kept), err)
	}
	relIDs, newVersions := make([]int64, len(list)), make([]int64, len(list))
	for i, x := range list {
		c := byID[x.id]
		relIDs[i], newVersions[i] = x.id, x.version
		b.released = append(b.released, releasedRow{c: c, version: x.version})
		b.notices = append(b.notices, outboxRow{kind: kindRelease, reservationID: x.id, version: x.version,
			slotID: c.SlotID, userID: c.UserID, payload: map[string]any{"appeal_until": x.appeal.UTC().Format(time.RFC3339)}})
	}
	b.notices = append(b.notices, availabilityRow(sortedSlots(slots), p.now))
	if err := m.st.insertHistoryMany(ctx, tx, relIDs, newVersions, StatePaid, StateReleased, p.actor,
		releaseReason, p.now); err != nil {
		return nil, fmt.Errorf("recording release history: %w", err)
	}
	if err := m.st.insertNoShows(ctx, tx, ids, users, categories, p.now); err != nil {
		return nil, fmt.Errorf("recording no-shows: %w", err)
	}
	return b, nil
}

// freeSlots returns the candidates' places and splits off (into out.failed)
// the candidates whose slot could not take them back.
func (m *Module[TTx]) freeSlots(ctx context.Context, tx keelsql.Tx[TTx], now time.Time, cands []Candidate, out *txOutcome) (map[int64]*slotState, []Candidate, error) {
	perReservation := make([]int64, len(cands))
	for i, c := range cands {
		perReservation[i] = c.SlotID
	}
	slots, err := m.returnCapacity(ctx, tx, now, perReservation)
	if err != nil {
		return nil, nil, err
	}
	kept := cands[:0:0]
	for _, c := range cands {
		if _, ok := slots[c.SlotID]; !ok {
			out.failed = append(out.failed, failure{c: c, restore: true,
				err: fmt.Errorf("slot %d holds fewer places than it would get back (held count drifted; reconcile it)", c.SlotID)})
			continue
		}
		kept = append(kept, c)
	}
	return slots, kept, nil
}

// promoteAll offers each slot's freed places to its waitlist and returns
// the offers plus, when any were made, an availability event with the
// slots' final counts.
func (m *Module[TTx]) promoteAll(ctx context.Context, tx keelsql.Tx[TTx], p *pass, slots map[int64]*slotState) ([]outboxRow, int, error) {
	var rows []outboxRow
	var changed []*slotState
	promoted := 0
	for _, s := range sortedSlots(slots) {
		offers, n, err := m.promote(ctx, tx, p, s, s.Freed)
		if err != nil {
			return nil, 0, err
		}
		if n > 0 {
			promoted += n
			rows = append(rows, offers...)
			changed = append(changed, s)
		}
	}
	if len(changed) > 0 {
		rows = append(rows, availabilityRow(changed, p.now))
	}
	return rows, promoted, nil
}

func sortedSlots(slots map[int64]*slotState) []*slotState {
	out := make([]*slotState, 0, len(slots))
	for _, s := range slots {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *slotState) int { return int(a.ID - b.ID) })
	return out
}

func usersOf(cands []Candidate) []string {
	seen := make(map[string]bool, len(cands))
	out := make([]string, 0, len(cands))
	for _, c := range cands {
		if !seen[c.UserID] {
			seen[c.UserID] = true
			out = append(out, c.UserID)
		}
	}
	return out
}
