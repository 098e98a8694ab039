package smpp

import "errors"

// readLoop reads and dispatches PDUs until the session ends.
func (c *Conn) readLoop() readEnd {
	for {
		frame, err := ReadFrame(c.br, MaxPDUSize)
		if err != nil {
			var de *DecodeError
			if errors.As(err, &de) {
				return readEnd{err: c.badFrame(frame, err, c.sendPDU)}
			}
			return readEnd{err: c.s.ReadErr(err)}
		}
		c.s.Touch()
		h, p, err := Decode(frame)
		if err != nil {
			if end, stop := c.badPDU(h, err); stop {
				return end
			}
			continue
		}
		if end, stop := c.dispatch(h, p); stop {
			return end
		}
	}
}

// badFrame answers a command_length outside [HeaderLen, MaxPDUSize] with
// generic_nack ESME_RINVCMDLEN. The stream cannot be split into PDUs any
// more, so the connection closes after it.
func (c *Conn) badFrame(header []byte, err error, write func(uint32, PDU) error) error {
	h, _ := ParseHeader(header)
	c.log.Error("smpp bad command_length, closing", "command", h.Command.String(), "seq", h.Seq, "err", err)
	if werr := write(h.Seq, &GenericNack{Status: StatusInvCmdLen}); werr != nil {
		c.log.Debug("smpp generic_nack not sent", "err", werr)
	}
	return err
}

// badPDU answers a request that failed to decode with its response (or
// generic_nack) carrying the status the DecodeError names; the frame
// boundary is intact, so the session goes on. A malformed response
// cannot be answered: it is logged and left to the ack timeout.
func (c *Conn) badPDU(h Header, err error) (readEnd, bool) {
	if h.Command.IsResponse() {
		c.log.Warn("smpp malformed response ignored", "command", h.Command.String(), "seq", h.Seq, "err", err)
		return readEnd{}, false
	}
	status := StatusOf(err)
	if bindTypeOf(h.Command) != 0 {
		status = StatusAlyBnd
	}
	c.log.Warn("smpp malformed request", "command", h.Command.String(), "seq", h.Seq,
		"status", StatusName(status), "err", err)
	if err := c.sendPDU(h.Seq, c.respFor(h.Command, status)); err != nil {
		return readEnd{err: err}, true
	}
	return readEnd{}, false
}

// respFor is the response to request cmd carrying status; generic_nack
// for a command without a response of its own here.
func (c *Conn) respFor(cmd CommandID, status uint32) PDU {
	switch cmd {
	case CmdSubmitSM:
		return &SubmitSMResp{Status: status}
	case CmdDeliverSM:
		return &DeliverSMResp{Status: status}
	case CmdUnbind:
		return &UnbindResp{Status: status}
	case CmdEnquireLink:
		return &EnquireLinkResp{Status: status}
	}
	if t := bindTypeOf(cmd); t != 0 {
		return bindRefusal(t, c.srv.cfg.SystemID, status)
	}
	return &GenericNack{Status: status}
}
