package domain

import "time"

// MaxGapsPerJump bounds the gap rows one jump opens: a carrier whose
// sequence leaps by a million must not make us queue a million backfills.
const MaxGapsPerJump = 100

// Event is one carrier event after normalization: what the aggregate
// advances on.
type Event struct {
	// Key is the idempotency key (source event id or fingerprint).
	Key string
	// Seq is the carrier's source sequence for the waybill (1, 2, …), or 0
	// when the carrier gives none.
	Seq int64
	// Milestone is the mapped milestone.
	Milestone Milestone
	// OccurredAt is when the carrier says it happened (UTC); TimeTrusted
	// says whether that time can order events (a zone was known and the
	// carrier's clock is trusted).
	OccurredAt  time.Time
	TimeTrusted bool
}

// State is a waybill's aggregate: its current milestone and what put it
// there. The zero State is a waybill with no applied event.
type State struct {
	Milestone   Milestone
	Seq         int64
	OccurredAt  time.Time
	TimeTrusted bool
	// EventKey is the idempotency key of the event that is current.
	EventKey string
	// Revision counts applied changes; it only grows.
	Revision int64
}

// Empty reports whether no event was applied yet.
func (s State) Empty() bool { return s.Revision == 0 }

// Outcome says what an event did to the aggregate.
type Outcome string

// Outcomes of Advance (and of ingestion before it).
const (
	// Advanced: the event became current.
	Advanced Outcome = "advanced"
	// Detail: an older event, kept as detail; the current state did not
	// move (a late 42 after 43).
	Detail Outcome = "detail"
	// Unordered: the event's order cannot be proven against the current
	// one (a sequenced carrier's event without a sequence, or a second
	// event claiming the current sequence); kept, advances nothing, shown
	// for an operator.
	Unordered Outcome = "unordered"
	// Unmapped: no mapping for the code yet; waits, advances nothing.
	Unmapped Outcome = "unmapped"
	// Duplicate: the same event again; the first result stands.
	Duplicate Outcome = "duplicate"
	// Collision: the same key with other core fields; quarantined.
	Collision Outcome = "collision"
)

// Decision is Advance's verdict.
type Decision struct {
	Outcome Outcome
	// Next is the aggregate after the event (equal to the input unless
	// Outcome is Advanced).
	Next State
	// GapFrom..GapTo (inclusive; GapTo ≥ GapFrom when a gap opened) are
	// the source sequences the jump skipped: backfill candidates. Those
	// already held as raw evidence are not gaps.
	GapFrom, GapTo int64
}

// Advance decides how ev moves s. With sequenced (the carrier promises a
// per-waybill sequence), order is the sequence alone: the aggregate is the
// event with the highest sequence, and a jump opens gaps. Without one,
// order is the milestone partial order, then the trusted occurred time,
// then the key, which is a total order: so the aggregate is the maximum
// over every event seen, whatever order they came in, and never moves back.
func Advance(s State, ev Event, sequenced bool) Decision {
	d := Decision{Outcome: Detail, Next: s}
	if sequenced {
		switch {
		case ev.Seq <= 0:
			d.Outcome = Unordered
			return d
		case ev.Seq == s.Seq && ev.Key != s.EventKey:
			d.Outcome = Unordered
			return d
		case ev.Seq <= s.Seq:
			return d
		}
		if ev.Seq > s.Seq+1 {
			d.GapFrom, d.GapTo = max(s.Seq+1, ev.Seq-MaxGapsPerJump), ev.Seq-1
		}
		d.Outcome, d.Next = Advanced, apply(s, ev)
		return d
	}
	if s.Empty() || after(ev, s) {
		d.Outcome, d.Next = Advanced, apply(s, ev)
	}
	return d
}

func apply(s State, ev Event) State {
	return State{Milestone: ev.Milestone, Seq: max(ev.Seq, s.Seq), OccurredAt: ev.OccurredAt, TimeTrusted: ev.TimeTrusted,
		EventKey: ev.Key, Revision: s.Revision + 1}
}

// after reports whether ev is above the current event in the unsequenced
// order: (milestone level, trusted time, key), compared in that order.
func after(ev Event, s State) bool {
	if a, b := ev.Milestone.level(), s.Milestone.level(); a != b {
		return a > b
	}
	ta, tb := trustedTime(ev.OccurredAt, ev.TimeTrusted), trustedTime(s.OccurredAt, s.TimeTrusted)
	if !ta.Equal(tb) {
		return ta.After(tb)
	}
	return ev.Key > s.EventKey
}

func trustedTime(t time.Time, trusted bool) time.Time {
	if !trusted {
		return time.Time{}
	}
	return t
}
