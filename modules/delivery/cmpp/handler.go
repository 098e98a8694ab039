package cmpp

import "context"

// Handler is the gateway's side of a connection. Its methods are called
// from the connection's goroutines, for several connections at once, so
// they must be safe for concurrent use. For one connection: Connected
// comes first, Disconnected last, after every other call for it returned.
type Handler interface {
	// Connected: the client authenticated and CONNECT_RESP is written. It
	// runs before the connection reads its next PDU, so it must not block;
	// start long work (such as pushing pending reports) in a goroutine.
	Connected(c *Conn)
	// Disconnected: the connection is gone. err is nil after a TERMINATE
	// exchange. DELIVERs still outstanding on c got neither DeliverResp
	// nor AckTimeout: treat them as unacknowledged.
	Disconnected(c *Conn, err error)
	// Submit records the message under msgID, which the server allocated
	// and returns in SUBMIT_RESP with the result. A non-zero result still
	// returns msgID (per spec) but the message must not be recorded. ctx
	// ends when the connection is dropped. Up to Config.Window Submit
	// calls run at once per connection.
	Submit(ctx context.Context, c *Conn, msgID MsgID, s *Submit) (result uint32)
	// DeliverResp is called for each DELIVER_RESP matched to an outstanding
	// DELIVER of this connection by sequence id; the window slot is free
	// by then. resp.MsgID is the peer's echo of the DELIVER's Msg_Id (a
	// mismatch is logged). It may run before the Conn.Deliver call that
	// sent seq has returned: key outstanding pushes by the Deliver's
	// MsgID, set before calling Deliver, or tolerate an early callback.
	// It runs on the read loop, so it must be quick.
	DeliverResp(c *Conn, seq uint32, resp *DeliverResp)
}

// AckTimeoutHandler is an optional Handler extension. AckTimeout is
// called when a DELIVER got no DELIVER_RESP within Config.AckTimeout; the
// slot is free again. A missing ACK is its own failure kind, apart from a
// DELIVER_RESP with a non-zero Result.
type AckTimeoutHandler interface {
	AckTimeout(c *Conn, seq uint32, msgID MsgID)
}

// LateAckHandler is an optional Handler extension. LateDeliverResp is
// called for a DELIVER_RESP that arrives after AckTimeout was reported for
// its DELIVER (the connection remembers the last few hundred). Without it
// late responses are logged and dropped.
type LateAckHandler interface {
	LateDeliverResp(c *Conn, seq uint32, msgID MsgID, resp *DeliverResp)
}

// SubmitRespHandler is an optional Handler extension. SubmitRespWritten
// is called after the SUBMIT_RESP carrying msgID was written (err nil) or
// could not be (err set). A status report for msgID must not be pushed
// before this: the client can only match a report to a Msg_Id it has seen.
type SubmitRespHandler interface {
	SubmitRespWritten(c *Conn, msgID MsgID, result uint32, err error)
}
