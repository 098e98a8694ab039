package cmpp

// acked matches a DELIVER_RESP to its DELIVER by sequence id.
func (c *Conn) acked(seq uint32, resp *DeliverResp) {
	if sent, ok := c.s.Resolve(seq); ok {
		if resp.MsgID != sent {
			c.log.Warn("cmpp deliver_resp echoes another msg_id", "seq", seq,
				"sent", sent.String(), "echoed", resp.MsgID.String())
		}
		c.srv.cfg.Handler.DeliverResp(c, seq, resp)
		return
	}
	id, late := c.s.TakeLate(seq)
	if !late {
		c.log.Warn("cmpp deliver_resp for no outstanding deliver", "seq", seq, "result", resp.Result)
		return
	}
	c.log.Warn("cmpp late deliver_resp", "seq", seq, "msg_id", id.String(), "result", resp.Result)
	if h, ok := c.srv.cfg.Handler.(LateAckHandler); ok {
		h.LateDeliverResp(c, seq, id, resp)
	}
}

// expire reports a DELIVER whose ack timer fired; the session calls it
// before Disconnected.
func (c *Conn) expire(seq uint32, id MsgID) {
	c.log.Warn("cmpp deliver_resp timed out", "seq", seq, "msg_id", id.String())
	if h, ok := c.srv.cfg.Handler.(AckTimeoutHandler); ok {
		h.AckTimeout(c, seq, id)
	}
}
