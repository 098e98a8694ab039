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
	ClassConnLost     = "conn_lost"      // the process or connection that wrote it is gone; outcome unknown
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
	// batch: a requeue task item. Its outcome settles the parked job
	// directly (no second claim, which a paused application would refuse),
	// and a failure keeps the window slot until the failure is counted, so
	// that the write waiting for the slot sees the auto-pause it may cause.
	batch bool

	mu      sync.Mutex
	parked  bool          // the worker returned JobWait: wake the job instead of signalling
	settled bool          // an outcome was queued
	done    chan finished // buffered 1: the applied outcome for a waiting worker
	outcome finished      // the applied outcome (set before it is delivered)
	release func()        // frees the window slot (once)
	relOnce sync.Once
	// key and gate: a task item's outcome is pending in gate under key
	// from its conclusion until it is counted (settled), so that the
	// key's next write waits for it and outcomes count in their order.
	key      string
	gate     *keyGate
	released bool
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

// freeSlot frees the window slot and ends the outcome's wait in the gate
// (each once).
func (a *attempt) freeSlot() {
	a.freeSlotOnly()
	a.gateDone()
}

// freeSlotOnly frees the window slot; the outcome stays pending in the gate.
func (a *attempt) freeSlotOnly() {
	a.relOnce.Do(func() {
		if a.release != nil {
			a.release()
		}
	})
}

// holdOutcome marks the attempt's outcome pending in g (under its key)
// until gateDone: the next write of the key waits for it to be counted.
func (a *attempt) holdOutcome(g *keyGate) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.released || a.gate != nil || g == nil || a.key == "" {
		return
	}
	a.gate = g
	g.add(a.key)
}

func (a *attempt) gateDone() {
	a.mu.Lock()
	g := a.gate
	a.gate, a.released = nil, true
	a.mu.Unlock()
	if g != nil {
		g.done(a.key)
	}
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

// holdsSlotFor: a task item's failure frees its window slot only once the
// failure is counted (settle), not when it is known.
func (a *attempt) holdsSlotFor(o outcome) bool { return a.batch && o.Status != StatusDelivered }

// unknownClass: the write's connection or process was lost, so whether the
// customer received and acknowledged it cannot be known. Not the customer's
// failure: it does not count toward the task's auto-pause threshold.
func unknownClass(class string) bool { return class == ClassConnClosed || class == ClassConnLost }

// graceAfterDeadline is added to an ACK deadline before a job looks at an
// attempt again, so that an ACK applied right at the deadline is seen.
const graceAfterDeadline = 500 * time.Millisecond
