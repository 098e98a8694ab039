package domain

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)

func TestAdvanceSequenced(t *testing.T) {
	s := State{Milestone: Arrived, Seq: 41, EventKey: "id:41", Revision: 41}
	d := Advance(s, Event{Key: "id:43", Seq: 43, Milestone: Customs}, true)
	if d.Outcome != Advanced || d.Next.Seq != 43 || d.Next.Revision != 42 || d.GapFrom != 42 || d.GapTo != 42 {
		t.Fatalf("43 after 41: %+v", d)
	}
	late := Advance(d.Next, Event{Key: "id:42", Seq: 42, Milestone: Arrived}, true)
	if late.Outcome != Detail || late.Next != d.Next {
		t.Fatalf("42 after 43: %+v", late)
	}
	if c := Advance(d.Next, Event{Key: "id:other-43", Seq: 43, Milestone: Delivered}, true); c.Outcome != Unordered || c.Next != d.Next {
		t.Fatalf("a second event claiming 43: %+v", c)
	}
	if c := Advance(d.Next, Event{Key: "fp:x", Milestone: Delivered}, true); c.Outcome != Unordered {
		t.Fatalf("an event without a sequence from a sequenced carrier: %+v", c)
	}
	if same := Advance(d.Next, Event{Key: "id:43", Seq: 43, Milestone: Customs}, true); same.Outcome != Detail {
		t.Fatalf("the current event again: %+v", same)
	}
	first := Advance(State{}, Event{Key: "id:5", Seq: 5, Milestone: Departed}, true)
	if first.GapFrom != 1 || first.GapTo != 4 {
		t.Fatalf("first event at 5 must open 1..4: %+v", first)
	}
	huge := Advance(s, Event{Key: "id:big", Seq: 1_000_000, Milestone: Delivered}, true)
	if huge.GapTo-huge.GapFrom+1 != MaxGapsPerJump || huge.GapTo != 999_999 {
		t.Fatalf("a leap opens at most %d gaps: %+v", MaxGapsPerJump, huge)
	}
	// 签收撤销 is a newer fact with a newer sequence, never an edit.
	del := State{Milestone: Delivered, Seq: 6, EventKey: "id:6", Revision: 6}
	if r := Advance(del, Event{Key: "id:7", Seq: 7, Milestone: DeliveryRevoked}, true); r.Outcome != Advanced || r.Next.Milestone != DeliveryRevoked {
		t.Fatalf("revocation: %+v", r)
	}
}

func TestAdvanceUnsequenced(t *testing.T) {
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	delivered := State{Milestone: Delivered, OccurredAt: at(1), TimeTrusted: true, EventKey: "fp:d", Revision: 3}
	// The complaint: delivered stamped before out-for-delivery.
	if d := Advance(delivered, Event{Key: "fp:o", Milestone: OutForDelivery, OccurredAt: at(2), TimeTrusted: true}, false); d.Outcome != Detail {
		t.Fatalf("a late 派送 moved a delivered parcel: %+v", d)
	}
	if d := Advance(delivered, Event{Key: "fp:x", Milestone: Exception, OccurredAt: at(3), TimeTrusted: true}, false); d.Outcome != Detail {
		t.Fatalf("an exception after 签收 moved it: %+v", d)
	}
	if d := Advance(delivered, Event{Key: "fp:r", Milestone: DeliveryRevoked, OccurredAt: at(4), TimeTrusted: true}, false); d.Outcome != Advanced {
		t.Fatalf("签收撤销: %+v", d)
	}
	ofd := State{Milestone: OutForDelivery, OccurredAt: at(1), TimeTrusted: true, EventKey: "fp:o", Revision: 1}
	if d := Advance(ofd, Event{Key: "fp:x", Milestone: Exception, OccurredAt: at(2), TimeTrusted: true}, false); d.Outcome != Advanced {
		t.Fatalf("a later exception during delivery: %+v", d)
	}
	if d := Advance(ofd, Event{Key: "fp:x", Milestone: Exception, OccurredAt: at(0), TimeTrusted: true}, false); d.Outcome != Detail {
		t.Fatalf("an earlier exception: %+v", d)
	}
	if d := Advance(ofd, Event{Key: "fp:x", Milestone: Exception, OccurredAt: at(2), TimeTrusted: false}, false); d.Outcome != Detail {
		t.Fatalf("an untrusted time cannot order: %+v", d)
	}
}

// TestOrderIsTotal: for every pair of distinct unsequenced events (every
// milestone, trusted or not, earlier, equal or later), exactly one is
// above the other, so the aggregate is a maximum and order of arrival
// cannot matter.
func TestOrderIsTotal(t *testing.T) {
	var evs []Event
	for i, m := range Milestones {
		for h := 0; h < 3; h++ {
			for _, tr := range []bool{true, false} {
				evs = append(evs, Event{Key: string(rune('a'+i)) + string(rune('0'+h)) + map[bool]string{true: "t", false: "u"}[tr],
					Milestone: m, OccurredAt: t0.Add(time.Duration(h) * time.Hour), TimeTrusted: tr})
			}
		}
	}
	for _, a := range evs {
		for _, b := range evs {
			if a.Key == b.Key {
				continue
			}
			sa := State{Milestone: a.Milestone, OccurredAt: a.OccurredAt, TimeTrusted: a.TimeTrusted, EventKey: a.Key, Revision: 1}
			sb := State{Milestone: b.Milestone, OccurredAt: b.OccurredAt, TimeTrusted: b.TimeTrusted, EventKey: b.Key, Revision: 1}
			ab := Advance(sa, b, false).Outcome == Advanced
			ba := Advance(sb, a, false).Outcome == Advanced
			if ab == ba {
				t.Fatalf("%+v vs %+v: both or neither above", a, b)
			}
		}
	}
}

func TestMilestoneWords(t *testing.T) {
	for _, m := range Milestones {
		if m.Word("zh") == string(m) || m.Word("en") == string(m) {
			t.Errorf("%s has no words", m)
		}
	}
	if Milestone("").Word("zh") != "暂无状态" {
		t.Error("an empty milestone must read 暂无状态")
	}
}
