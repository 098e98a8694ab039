package keelrecon

// Event is what happens to a discrepancy.
type Event string

// The events of the lifecycle.
const (
	EventRequest  Event = "request"  // an operator asks for approval
	EventApprove  Event = "approve"  // a second operator approves
	EventReject   Event = "reject"   // a second operator rejects
	EventExecute  Event = "execute"  // an operator executes the action
	EventAutoHeal Event = "autoheal" // the run executes a safe action
	EventSeen     Event = "seen"     // a run finds it (again)
	EventGone     Event = "gone"     // a run no longer finds it
)

// Next is the lifecycle as a pure function: the state after ev, and
// whether ev is allowed in from (needsApproval: the action needs a second
// operator). EventSeen in a state it does not change returns (from, true).
func Next(from State, ev Event, needsApproval bool) (State, bool) {
	switch ev {
	case EventRequest:
		return StateAwaitingApproval, from == StateOpen
	case EventApprove:
		return StateApproved, from == StateAwaitingApproval
	case EventReject:
		return StateRejected, from == StateAwaitingApproval
	case EventExecute:
		return StateExecuted, from == StateApproved || (from == StateOpen && !needsApproval)
	case EventAutoHeal:
		return StateAutoHealed, from == StateOpen && !needsApproval
	case EventGone:
		switch from {
		case StateAutoHealed, StateExecuted:
			return StateVerified, true
		case StateOpen, StateAwaitingApproval, StateApproved, StateRejected:
			return StateResolved, true
		}
	case EventSeen:
		switch from {
		case StateAutoHealed, StateExecuted, StateVerified, StateResolved:
			return StateOpen, true
		}
		return from, from.Valid()
	}
	return from, false
}
