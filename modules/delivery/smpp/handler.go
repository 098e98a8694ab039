package smpp

import "context"

// Handler is the gateway's side of a connection; the same shape as the
// CMPP server's, so one adapter can serve both. Its methods are called
// from the connection's goroutines, for several connections at once, so
// they must be safe for concurrent use. For one connection: Connected
// comes first, Disconnected last, after every other call for it returned.
type Handler interface {
	// Connected: the ESME is bound and bind_resp is written. It runs
	// before the connection reads its next PDU, so it must not block;
	// start long work (such as pushing pending receipts) in a goroutine.
	Connected(c *Conn)
	// Disconnected: the connection is gone. err is nil after an unbind
	// exchange. deliver_sm still outstanding on c got neither DeliverResp
	// nor AckTimeout: treat them as unacknowledged.
	Disconnected(c *Conn, err error)
	// Submit records the message under messageID, which the server
	// allocated and returns in submit_sm_resp when status is StatusOK. A
	// non-zero status is sent without the id (as SMPP 3.4 says) and the
	// message must not be recorded. ctx ends when the connection is
	// dropped. Up to Config.Window Submit calls run at once per connection.
	Submit(ctx context.Context, c *Conn, messageID string, s *SubmitSM) (status uint32)
	// DeliverResp is called for each deliver_sm_resp (or generic_nack)
	// matched to an outstanding deliver_sm of this connection by sequence
	// number; the window slot is free by then. resp.Status 0 is the
	// acknowledgement. deliver_sm has no id of its own, so seq is the only
	// key: it may run before the Conn.Deliver call that sent seq has
	// returned, so tolerate an early callback. It runs on the read loop,
	// so it must be quick.
	DeliverResp(c *Conn, seq uint32, resp *DeliverSMResp)
}

// AckTimeoutHandler is an optional Handler extension. AckTimeout is
// called when a deliver_sm got no response within Config.AckTimeout; the
// slot is free again. A missing response is its own failure kind, apart
// from a deliver_sm_resp with a non-zero status.
type AckTimeoutHandler interface {
	AckTimeout(c *Conn, seq uint32)
}

// LateAckHandler is an optional Handler extension. LateDeliverResp is
// called for a deliver_sm_resp that arrives after AckTimeout was reported
// for its deliver_sm (the connection remembers the last few hundred).
// Without it late responses are logged and dropped.
type LateAckHandler interface {
	LateDeliverResp(c *Conn, seq uint32, resp *DeliverSMResp)
}

// SubmitRespHandler is an optional Handler extension. SubmitRespWritten
// is called after the submit_sm_resp for messageID was written (err nil)
// or could not be (err set). A receipt for messageID must not be sent
// before this: the ESME can only match a receipt to an id it has seen.
type SubmitRespHandler interface {
	SubmitRespWritten(c *Conn, messageID string, status uint32, err error)
}
