package smpp

// dispatch acts on one decoded PDU of a bound session.
func (c *Conn) dispatch(h Header, p PDU) (readEnd, bool) {
	if h.Command.IsResponse() {
		return c.dispatchResponse(h, p)
	}
	var reply PDU
	switch p := p.(type) {
	case *SubmitSM:
		if !c.bindType.Transmits() {
			reply = &SubmitSMResp{Status: StatusInvBndSts} // a receiver may not submit
			break
		}
		c.startSubmit(h.Seq, p)
	case *EnquireLink:
		reply = &EnquireLinkResp{}
	case *Unbind:
		return readEnd{replySeq: &h.Seq}, true
	case *Bind:
		reply = c.respFor(h.Command, StatusAlyBnd)
	default: // deliver_sm is ours to send, not the ESME's
		reply = &GenericNack{Status: StatusInvCmdID}
	}
	if reply != nil {
		if err := c.sendPDU(h.Seq, reply); err != nil {
			return readEnd{err: err}, true
		}
	}
	return readEnd{}, false
}

func (c *Conn) dispatchResponse(h Header, p PDU) (readEnd, bool) {
	switch p := p.(type) {
	case *DeliverSMResp:
		c.acked(h.Seq, p)
	case *GenericNack:
		c.nacked(h.Seq, p)
	case *EnquireLinkResp:
		// liveness is recorded by touch
	case *UnbindResp:
		if c.s.Leaving() {
			return readEnd{}, true
		}
		c.log.Warn("smpp unsolicited unbind_resp", "seq", h.Seq)
	default:
		c.log.Warn("smpp unexpected response ignored", "command", h.Command.String(), "seq", h.Seq)
	}
	return readEnd{}, false
}
