// Package domain holds the inventory's rules as pure functions: the
// reservation state machine (a transition table), what each movement does
// to a balance, and the checks on quantities and identifiers. Nothing here
// touches the database.
package domain

import (
	"errors"
	"fmt"
	"regexp"
)

// State is a reservation's state (预占单状态).
type State string

// The reservation states.
const (
	Pending   State = "pending"   // 待处理
	Reserved  State = "reserved"  // 已预占
	Failed    State = "failed"    // 失败 (insufficient stock)
	Confirmed State = "confirmed" // 已确认 (shipment confirmed)
	Released  State = "released"  // 已释放 (cancelled or timed out)
	Returning State = "returning" // 退货处理中
	Returned  State = "returned"  // 已退回
)

// States lists every state a reservation can be in.
var States = []State{Pending, Reserved, Failed, Confirmed, Released, Returning, Returned}

// Action is what moves a reservation.
type Action string

// The actions.
const (
	ActReserve      Action = "reserve"       // 待处理 → 已预占
	ActFail         Action = "fail"          // 待处理 → 失败
	ActConfirm      Action = "confirm"       // 已预占 → 已确认
	ActRelease      Action = "release"       // 已预占 → 已释放
	ActReturnStart  Action = "return"        // 已确认 → 退货处理中
	ActReturnFinish Action = "return_finish" // 退货处理中 → 已退回
)

// Actions lists every action.
var Actions = []Action{ActReserve, ActFail, ActConfirm, ActRelease, ActReturnStart, ActReturnFinish}

// Outcome classifies an action attempted in a state.
type Outcome int

// Outcomes of Decide.
const (
	// Move: the action applies; the reservation goes to Transition.To.
	Move Outcome = iota + 1
	// Done: the reservation is already where this action leads (a replay
	// whose record was lost, or a second caller): nothing changes.
	Done
	// Clash: an opposite action already won (a confirm at 已释放, a release
	// at 已确认): nothing changes and a conflict ticket is opened.
	Clash
	// Refused: the action makes no sense in the state (a return of a
	// reservation never confirmed): nothing changes, the caller is told.
	Refused
)

// Transition is one row of the table.
type Transition struct {
	From State
	Act  Action
	To   State
}

// table is the whole state machine: every allowed move.
var table = []Transition{
	{Pending, ActReserve, Reserved},
	{Pending, ActFail, Failed},
	{Reserved, ActConfirm, Confirmed},
	{Reserved, ActRelease, Released},
	{Confirmed, ActReturnStart, Returning},
	{Returning, ActReturnFinish, Returned},
}

// clashes are (state, action) pairs where the opposite action won.
var clashes = map[State][]Action{
	Released:  {ActConfirm},
	Confirmed: {ActRelease},
	Returning: {ActRelease},
	Returned:  {ActRelease},
}

// Table returns a copy of the transition table.
func Table() []Transition { return append([]Transition(nil), table...) }

// Decide says what act does to a reservation in state from, and where it
// leads when it moves.
func Decide(from State, act Action) (Outcome, State) {
	for _, t := range table {
		if t.From == from && t.Act == act {
			return Move, t.To
		}
	}
	for _, a := range clashes[from] {
		if a == act {
			return Clash, from
		}
	}
	if done(from, act) {
		return Done, from
	}
	return Refused, from
}

// done reports whether from is a state act would have led to, or passed
// through: a repeat that must change nothing.
func done(from State, act Action) bool {
	switch act {
	case ActConfirm:
		return from == Confirmed || from == Returning || from == Returned
	case ActRelease:
		return from == Released
	case ActReturnStart:
		return from == Returning || from == Returned
	case ActReturnFinish:
		return from == Returned
	case ActReserve:
		return from == Reserved || from == Confirmed || from == Released || from == Returning || from == Returned
	case ActFail:
		return from == Failed
	}
	return false
}

// Terminal reports whether no action moves a reservation out of s.
func Terminal(s State) bool {
	for _, t := range table {
		if t.From == s {
			return false
		}
	}
	return true
}

// Delta is what a movement does to a balance.
type Delta struct {
	OnHand, Available, Reserved, Sold, Returned int64
}

// Movement names a ledger entry's kind.
type Movement string

// The movements.
const (
	MoveReceive Movement = "receive" // goods in: on hand and available grow
	MoveReserve Movement = "reserve" // available → reserved
	MoveRelease Movement = "release" // reserved → available
	MoveConfirm Movement = "confirm" // reserved leaves the warehouse: sold
	MoveReturn  Movement = "return"  // goods back: on hand and available grow, returned counts it
	MoveAdjust  Movement = "adjust"  // an explicit correction with a reason (count, conflict)
)

// DeltaOf is the balance change of a movement of qty (adjustments carry
// their sign in qty).
func DeltaOf(m Movement, qty int64) Delta {
	switch m {
	case MoveReceive, MoveAdjust:
		return Delta{OnHand: qty, Available: qty}
	case MoveReserve:
		return Delta{Available: -qty, Reserved: qty}
	case MoveRelease:
		return Delta{Available: qty, Reserved: -qty}
	case MoveConfirm:
		return Delta{OnHand: -qty, Reserved: -qty, Sold: qty}
	case MoveReturn:
		return Delta{OnHand: qty, Available: qty, Returned: qty}
	}
	return Delta{}
}

// MovementOf is the ledger movement an action books, if any.
func MovementOf(a Action) (Movement, bool) {
	switch a {
	case ActReserve:
		return MoveReserve, true
	case ActConfirm:
		return MoveConfirm, true
	case ActRelease:
		return MoveRelease, true
	case ActReturnFinish:
		return MoveReturn, true
	}
	return "", false
}

// Balance is a stock row's quantities.
type Balance struct {
	OnHand, Available, Reserved, Sold, Returned int64
}

// Apply adds d to b.
func (b Balance) Apply(d Delta) Balance {
	return Balance{b.OnHand + d.OnHand, b.Available + d.Available, b.Reserved + d.Reserved, b.Sold + d.Sold, b.Returned + d.Returned}
}

// Valid reports whether a balance keeps the invariants: nothing negative
// and on hand = available + reserved.
func (b Balance) Valid() bool {
	return b.OnHand >= 0 && b.Available >= 0 && b.Reserved >= 0 && b.Sold >= 0 && b.Returned >= 0 &&
		b.OnHand == b.Available+b.Reserved
}

// MaxQty bounds one request's quantity: more is an input error, not a
// large order.
const MaxQty = 1_000_000

// ErrInvalid is wrapped by every input error.
var ErrInvalid = errors.New("invalid")

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$`)

// CheckID checks an identifier (warehouse, SKU, order line).
func CheckID(what, id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("%w: %s %q must be 1 to 128 letters, digits or _.:/- starting with a letter or digit", ErrInvalid, what, id)
	}
	return nil
}

// CheckQty checks a request's quantity.
func CheckQty(qty int64) error {
	if qty <= 0 || qty > MaxQty {
		return fmt.Errorf("%w: quantity %d must be from 1 to %d", ErrInvalid, qty, MaxQty)
	}
	return nil
}

// CheckDelta checks an adjustment's signed quantity.
func CheckDelta(d int64) error {
	if d == 0 || d > MaxQty || d < -MaxQty {
		return fmt.Errorf("%w: adjustment %d must be non-zero and at most %d either way", ErrInvalid, d, MaxQty)
	}
	return nil
}

// Grant decides, for requests of qtys in arrival order against available,
// which are granted: each in turn while the running total fits. It is
// what the coalesced statement computes in SQL; the module uses it to
// read the statement's result back per request.
func Grant(available int64, qtys []int64) []bool {
	out := make([]bool, len(qtys))
	var sum int64
	for i, q := range qtys {
		if sum+q <= available {
			sum += q
			out[i] = true
		} else {
			break
		}
	}
	return out
}

// Cumulative returns the running totals of qtys.
func Cumulative(qtys []int64) []int64 {
	out := make([]int64, len(qtys))
	var sum int64
	for i, q := range qtys {
		sum += q
		out[i] = sum
	}
	return out
}

// Words names states and movements for people, Chinese first.
var Words = map[string][2]string{
	string(Pending):     {"待处理", "pending"},
	string(Reserved):    {"已预占", "reserved"},
	string(Failed):      {"失败（库存不足）", "failed (insufficient stock)"},
	string(Confirmed):   {"已确认出库", "confirmed"},
	string(Released):    {"已释放", "released"},
	string(Returning):   {"退货处理中", "return in progress"},
	string(Returned):    {"已退回", "returned"},
	string(MoveReceive): {"入库", "received"},
	string(MoveReserve): {"预占", "reserved"},
	string(MoveRelease): {"释放", "released"},
	string(MoveConfirm): {"确认出库", "shipped"},
	string(MoveReturn):  {"退货入库", "returned"},
	string(MoveAdjust):  {"调整", "adjustment"},
}

// OrderStatus is what the order service says of an order line.
type OrderStatus string

// The order statuses the timeout check understands; anything else (and no
// answer) is unknown.
const (
	OrderPending   OrderStatus = "pending"   // awaiting payment
	OrderPaid      OrderStatus = "paid"      // paid, not shipped yet
	OrderShipped   OrderStatus = "shipped"   // the warehouse shipped it
	OrderCancelled OrderStatus = "cancelled" // cancelled or payment timed out
	OrderUnknown   OrderStatus = ""
)

// ShipStatus is what the warehouse says of a reservation's shipment.
type ShipStatus string

// The warehouse's answers.
const (
	ShipNone    ShipStatus = "none"    // nothing picked or shipped
	ShipPicking ShipStatus = "picking" // in progress
	ShipShipped ShipStatus = "shipped"
	ShipUnknown ShipStatus = ""
)

// TimeoutVerdict is what the timeout check does with a reservation.
type TimeoutVerdict int

// Verdicts of Timeout.
const (
	// TimeoutRelease: both sides say the stock is not needed.
	TimeoutRelease TimeoutVerdict = iota + 1
	// TimeoutKeep: the order goes on (paid, shipping): check again later.
	TimeoutKeep
	// TimeoutUnknown: an answer is missing or unreadable: delay, and after
	// the budget hand it to a person. Never a release.
	TimeoutUnknown
)

// Timeout decides a timed-out reservation from the two answers: a release
// needs the order cancelled or still unpaid past its time, and the
// warehouse to have nothing in hand. Age alone never releases.
func Timeout(order OrderStatus, ship ShipStatus) TimeoutVerdict {
	switch {
	case order == OrderUnknown || ship == ShipUnknown:
		return TimeoutUnknown
	case ship == ShipShipped || ship == ShipPicking || order == OrderShipped || order == OrderPaid:
		return TimeoutKeep
	case (order == OrderCancelled || order == OrderPending) && ship == ShipNone:
		return TimeoutRelease
	}
	return TimeoutUnknown
}
