package domain

import "testing"

// TestDecideExhaustive walks every (state, action) pair: the moves are
// exactly the table's, the clashes are the opposite-action pairs, and every
// other pair is a repeat or a refusal that leaves the state alone.
func TestDecideExhaustive(t *testing.T) {
	moves := map[[2]string]State{}
	for _, tr := range Table() {
		moves[[2]string{string(tr.From), string(tr.Act)}] = tr.To
	}
	clash := map[[2]string]bool{
		{string(Released), string(ActConfirm)}:  true,
		{string(Confirmed), string(ActRelease)}: true,
		{string(Returning), string(ActRelease)}: true,
		{string(Returned), string(ActRelease)}:  true,
	}
	for _, s := range States {
		for _, a := range Actions {
			out, to := Decide(s, a)
			k := [2]string{string(s), string(a)}
			want, isMove := moves[k]
			switch {
			case isMove:
				if out != Move || to != want {
					t.Errorf("%s+%s = %v,%s; want move to %s", s, a, out, to, want)
				}
			case clash[k]:
				if out != Clash || to != s {
					t.Errorf("%s+%s = %v; want clash", s, a, out)
				}
			default:
				if out != Done && out != Refused {
					t.Errorf("%s+%s = %v; want done or refused", s, a, out)
				}
				if to != s {
					t.Errorf("%s+%s moved to %s", s, a, to)
				}
			}
		}
	}
	// The seed's rules, spelled out.
	for _, c := range []struct {
		s    State
		a    Action
		want Outcome
	}{
		{Released, ActConfirm, Clash}, {Confirmed, ActRelease, Clash}, {Released, ActRelease, Done},
		{Confirmed, ActConfirm, Done}, {Failed, ActConfirm, Refused}, {Failed, ActRelease, Refused},
		{Pending, ActConfirm, Refused}, {Reserved, ActReturnStart, Refused},
	} {
		if got, _ := Decide(c.s, c.a); got != c.want {
			t.Errorf("%s+%s = %v; want %v", c.s, c.a, got, c.want)
		}
	}
	for _, s := range []State{Failed, Released, Returned} {
		if !Terminal(s) {
			t.Errorf("%s should be terminal", s)
		}
	}
	for _, s := range []State{Pending, Reserved, Confirmed, Returning} {
		if Terminal(s) {
			t.Errorf("%s should not be terminal", s)
		}
	}
}

// TestMovementsKeepInvariants applies every movement's delta, where it is
// allowed, to a range of balances: none breaks on hand = available +
// reserved, and the only way below zero is one the conditional update
// refuses (available or reserved short).
func TestMovementsKeepInvariants(t *testing.T) {
	for _, m := range []Movement{MoveReceive, MoveReserve, MoveRelease, MoveConfirm, MoveReturn, MoveAdjust} {
		for av := int64(0); av < 4; av++ {
			for rs := int64(0); rs < 4; rs++ {
				for q := int64(1); q < 4; q++ {
					b := Balance{OnHand: av + rs, Available: av, Reserved: rs}
					after := b.Apply(DeltaOf(m, q))
					guarded := (m == MoveReserve && av < q) || ((m == MoveRelease || m == MoveConfirm) && rs < q)
					if guarded {
						continue
					}
					if !after.Valid() {
						t.Errorf("%s %d on %+v gives %+v", m, q, b, after)
					}
				}
			}
		}
	}
	for _, a := range Actions {
		if m, ok := MovementOf(a); ok && DeltaOf(m, 1) == (Delta{}) {
			t.Errorf("%s books %s with no effect", a, m)
		}
	}
}

func TestGrant(t *testing.T) {
	got := Grant(5, []int64{2, 2, 2, 1})
	want := []bool{true, true, false, false}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Grant = %v; want %v", got, want)
		}
	}
	cum := Cumulative([]int64{2, 2, 2, 1})
	for i, c := range []int64{2, 4, 6, 7} {
		if cum[i] != c {
			t.Fatalf("Cumulative = %v", cum)
		}
	}
}

func TestChecks(t *testing.T) {
	for _, q := range []int64{0, -1, MaxQty + 1} {
		if CheckQty(q) == nil {
			t.Errorf("qty %d accepted", q)
		}
	}
	if CheckQty(1) != nil || CheckQty(MaxQty) != nil {
		t.Error("good quantity refused")
	}
	for _, id := range []string{"", " a", "a b", "-x", string(make([]byte, 200))} {
		if CheckID("sku", id) == nil {
			t.Errorf("id %q accepted", id)
		}
	}
	if CheckID("sku", "SKU-1") != nil || CheckDelta(0) == nil || CheckDelta(-3) != nil {
		t.Error("checks wrong")
	}
}

// TestTimeoutExhaustive: only (cancelled or unpaid) with nothing in the
// warehouse releases; any unknown answer is unknown; the rest keep.
func TestTimeoutExhaustive(t *testing.T) {
	orders := []OrderStatus{OrderPending, OrderPaid, OrderShipped, OrderCancelled, OrderUnknown, "weird"}
	ships := []ShipStatus{ShipNone, ShipPicking, ShipShipped, ShipUnknown, "weird"}
	for _, o := range orders {
		for _, s := range ships {
			got := Timeout(o, s)
			known := (o == OrderPending || o == OrderPaid || o == OrderShipped || o == OrderCancelled) &&
				(s == ShipNone || s == ShipPicking || s == ShipShipped)
			var want TimeoutVerdict
			switch {
			case o == OrderUnknown || s == ShipUnknown:
				want = TimeoutUnknown
			case !known && (s == ShipShipped || s == ShipPicking || o == OrderShipped || o == OrderPaid):
				want = TimeoutKeep
			case !known:
				want = TimeoutUnknown
			case (o == OrderCancelled || o == OrderPending) && s == ShipNone:
				want = TimeoutRelease
			default:
				want = TimeoutKeep
			}
			if got != want {
				t.Errorf("Timeout(%q, %q) = %v; want %v", o, s, got, want)
			}
			if got == TimeoutRelease && (s != ShipNone || (o != OrderCancelled && o != OrderPending)) {
				t.Errorf("Timeout(%q, %q) releases", o, s)
			}
		}
	}
}
