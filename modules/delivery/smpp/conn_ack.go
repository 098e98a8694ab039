package smpp

// acked matches a deliver_sm_resp to its deliver_sm by sequence number.
func (c *Conn) acked(seq uint32, resp *DeliverSMResp) {
	if _, ok := c.s.Resolve(seq); ok {
		c.srv.cfg.Handler.DeliverResp(c, seq, resp)
		return
	}
	_, late := c.s.TakeLate(seq)
	if !late {
		c.log.Warn("smpp deliver_sm_resp for no outstanding deliver_sm", "seq", seq, "status", StatusName(resp.Status))
		return
	}
	c.log.Warn("smpp late deliver_sm_resp", "seq", seq, "status", StatusName(resp.Status))
	if h, ok := c.srv.cfg.Handler.(LateAckHandler); ok {
		h.LateDeliverResp(c, seq, resp)
	}
}

// nacked treats a generic_nack for an outstanding deliver_sm as its
// refusal: the ESME could not take the PDU, which is as final an answer
// as a deliver_sm_resp with that status.
func (c *Conn) nacked(seq uint32, n *GenericNack) {
	if c.s.Outstanding(seq) {
		c.acked(seq, &DeliverSMResp{Status: n.Status})
		return
	}
	c.log.Warn("smpp generic_nack from the ESME", "seq", seq, "status", StatusName(n.Status))
}

// expire reports a deliver_sm whose ack timer fired; the session calls
// it before Disconnected.
func (c *Conn) expire(seq uint32, _ struct{}) {
	c.log.Warn("smpp deliver_sm_resp timed out", "seq", seq)
	if h, ok := c.srv.cfg.Handler.(AckTimeoutHandler); ok {
		h.AckTimeout(c, seq)
	}
}
