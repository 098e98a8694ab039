package smpp

// startSubmit runs Handler.Submit on its own goroutine, at most Window at
// once per connection; when all slots are busy the read loop waits,
// which pushes back on the ESME through TCP.
func (c *Conn) startSubmit(seq uint32, s *SubmitSM) {
	c.s.Submit(func() { c.submit(seq, s) })
}

func (c *Conn) submit(seq uint32, s *SubmitSM) {
	id := c.srv.ids.Next()
	status := c.srv.cfg.Handler.Submit(c.s.Context(), c, id, s)
	resp := &SubmitSMResp{Status: status}
	if status == StatusOK {
		resp.MessageID = id // an error response has no body
	}
	b, err := Encode(seq, resp)
	if err == nil {
		err = c.writeWait(b)
	}
	if err != nil {
		c.log.Warn("smpp submit_sm_resp not written", "seq", seq, "message_id", id, "err", err)
	}
	if h, ok := c.srv.cfg.Handler.(SubmitRespHandler); ok {
		h.SubmitRespWritten(c, id, status, err)
	}
}
