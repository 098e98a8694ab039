package delivery

import (
	"sync"
	"time"
)

// Failure classes: every failed attempt is normalized to one of these
// (kept as the record's last_error_class and as the prefix of the job's
// error), with the raw error beside it.
const (
	ClassAckTimeout   = "ack_timeout"    // written, no ACK before the deadline
	ClassAckRejected  = "ack_rejected"   // ACK with a non-zero result
	ClassInvalidMsgID = "invalid_msg_id" // ACK echoing another Msg_Id
	ClassInvalidAck   = "invalid_ack"    // HTTP body without a valid per-item ACK
	ClassConnClosed   = "conn_closed"    // the connection ended before the ACK
	ClassHTTPTimeout  = "http_timeout"   // the HTTP push timed out
	ClassHTTPStatus   = "http_status"    // the customer answered non-2xx
	ClassHTTPConnect  = "http_connect"   // the customer's URL could not be reached
	ClassEncode       = "encode"         // the push could not be encoded
	ClassGateway      = "gateway_error"  // any other gateway error
)

// attempt is one push in flight on this instance: claimed, being written
// or written, until its outcome is applied to the record.
type attempt struct {
	recordID int64
	token    string
	jobID    int64
	connID   string
	seq      uint32
	outer    uint64 // the outer Msg_Id written (CMPP)

	mu      sync.Mutex
	parked  bool          // the worker returned JobWait: wake the job instead of signalling
	settled bool          // an outcome was queued
	done    chan finished // buffered 1: the applied outcome for a waiting worker
	release func()        // frees the window slot (once)
	relOnce sync.Once
}

// finished tells a waiting worker how its attempt ended: the status the
// record reached, or applied=false when another conclusion came first (the
// worker then re-reads the record).
type finished struct {
	status  Status
	class   string
	err     string
	applied bool
}

func newAttempt(recordID int64, token string, jobID int64) *attempt {
	return &attempt{recordID: recordID, token: token, jobID: jobID, done: make(chan finished, 1)}
}

func (a *attempt) freeSlot() {
	a.relOnce.Do(func() {
		if a.release != nil {
			a.release()
		}
	})
}

// settle marks the attempt concluded; false when it was already.
func (a *attempt) settle() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.settled {
		return false
	}
	a.settled = true
	return true
}

// park marks the worker gone; false when an outcome is already waiting
// in done (the worker should take it instead of parking).
func (a *attempt) park() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.done) > 0 {
		return false
	}
	a.parked = true
	return true
}

// deliver hands the applied outcome to the worker, or reports that the
// worker parked (the job must be woken).
func (a *attempt) deliver(f finished) (parked bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.parked {
		return true
	}
	a.done <- f
	return false
}

func tokenOf(jobID int64) string { return "j" + itoa(jobID) }

// graceAfterDeadline is added to an ACK deadline before a job looks at an
// attempt again, so that an ACK applied right at the deadline is seen.
const graceAfterDeadline = 500 * time.Millisecond
