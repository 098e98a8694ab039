package smpp

import "fmt"

// MessageState is the message_state TLV of a delivery receipt (SMPP 3.4
// section 5.2.28).
type MessageState uint8

// The message states.
const (
	StateEnroute       MessageState = 1
	StateDelivered     MessageState = 2
	StateExpired       MessageState = 3
	StateDeleted       MessageState = 4
	StateUndeliverable MessageState = 5
	StateAccepted      MessageState = 6
	StateUnknown       MessageState = 7
	StateRejected      MessageState = 8
)

// The receipt stat words, one per state.
const (
	StatEnroute   = "ENROUTE"
	StatDelivered = "DELIVRD"
	StatExpired   = "EXPIRED"
	StatDeleted   = "DELETED"
	StatUndeliv   = "UNDELIV"
	StatAccepted  = "ACCEPTD"
	StatUnknown   = "UNKNOWN"
	StatRejected  = "REJECTD"
)

var stateStats = [...]string{"", StatEnroute, StatDelivered, StatExpired, StatDeleted,
	StatUndeliv, StatAccepted, StatUnknown, StatRejected}

// StateForStat maps a stat word to its state. Other words (carrier codes
// such as "MA:0001") map to StateUnknown; set Receipt.State to say more.
func StateForStat(stat string) MessageState {
	for i, s := range stateStats {
		if i > 0 && s == stat {
			return MessageState(i)
		}
	}
	return StateUnknown
}

func (s MessageState) String() string {
	if s > 0 && int(s) < len(stateStats) {
		return stateStats[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}
