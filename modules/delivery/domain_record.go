package delivery

import (
	"encoding/json"
	"time"
)

// Status is a delivery record's status.
type Status string

// Record statuses.
const (
	StatusPending     Status = "pending"
	StatusAwaitingACK Status = "awaiting_ack"
	StatusDelivered   Status = "delivered"
	StatusFailed      Status = "failed"
	StatusUnconfirmed Status = "unconfirmed"
	StatusRejected    Status = "rejected"
)

// AllStatuses lists the statuses in display order.
var AllStatuses = []Status{StatusPending, StatusAwaitingACK, StatusDelivered, StatusFailed, StatusUnconfirmed, StatusRejected}

// RequeueStatuses may be requeued (singly, by page or by task); a record
// awaiting its ACK never is, so that two pushes of it are never in flight.
var RequeueStatuses = []Status{StatusPending, StatusFailed, StatusUnconfirmed, StatusRejected, StatusDelivered}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	for _, v := range AllStatuses {
		if v == s {
			return true
		}
	}
	return false
}

// Requeueable reports whether s is in RequeueStatuses.
func (s Status) Requeueable() bool {
	for _, v := range RequeueStatuses {
		if v == s {
			return true
		}
	}
	return false
}

// Kind is what a record carries.
type Kind string

// Record kinds.
const (
	KindReport Kind = "report" // status report (状态回执)
	KindMO     Kind = "mo"     // MO message (上行短信)
)

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return k == KindReport || k == KindMO }

// Record is a downstream delivery record.
type Record struct {
	ID             int64
	Kind           Kind
	AppID          int64
	EnterpriseID   int64
	SubmitID       *int64 // the original Submit mapping (reports); nil when gone
	MsgID          string // report: the original submit's Msg_Id; MO: the MO's Msg_Id
	Phone          string
	Payload        json.RawMessage // nil when incomplete
	UpstreamKey    string
	Status         Status
	PrevStatus     Status
	Version        int64
	Attempts       int
	LastError      string
	LastErrorClass string
	Sender         string // who made the current or last attempt: "push", "requeue", "task:<id>"
	SendToken      string // the attempt's token: "j<job id>"
	SendJobID      int64
	SendBatchID    int64
	ConnID         string
	Seq            *int64
	DeliverMsgID   string // the outer Msg_Id of the DELIVER written
	AckDeadline    *time.Time
	SentAt         *time.Time
	AckedAt        *time.Time
	AckResult      *int64
	History        json.RawMessage
	CreatedAt      time.Time
	UpdatedAt      time.Time

	// Joined for display by list queries.
	AppName, Account, EnterpriseName string
}

// ReportPayload is a status report's content.
type ReportPayload struct {
	// DestID is the Dest_Id of the DELIVER: the Src_Id of the original
	// submit (the customer's long number).
	DestID       string `json:"dest_id,omitempty"`
	Stat         string `json:"stat"`
	SubmitTime   string `json:"submit_time"` // YYMMDDHHMM
	DoneTime     string `json:"done_time"`   // YYMMDDHHMM
	DestTerminal string `json:"dest_terminal"`
	SMSCSequence uint32 `json:"smsc_sequence"`
}

// MOPayload is an MO message's content.
type MOPayload struct {
	DestID    string `json:"dest_id"` // service code + extension the handset sent to
	ServiceID string `json:"service_id"`
	MsgFmt    uint8  `json:"msg_fmt"`
	Content   []byte `json:"content"`
	Text      string `json:"text,omitempty"` // decoded for display
}

// event is one entry of a record's history: the evidence of each attempt
// and its ACK, kept with the record.
type event struct {
	At     time.Time `json:"at"`
	Event  string    `json:"event"` // claimed, reverted, delivered, rejected, unconfirmed, failed, requeued, late_ack
	By     string    `json:"by,omitempty"`
	Conn   string    `json:"conn,omitempty"`
	Seq    *int64    `json:"seq,omitempty"`
	Result *int64    `json:"result,omitempty"`
	Class  string    `json:"class,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

func (e event) json() string {
	b, _ := json.Marshal(e)
	return string(b)
}
