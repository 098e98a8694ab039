package cmpp

// startSubmit runs Handler.Submit on its own goroutine, at most Window at
// once per connection; when all slots are busy the read loop waits, which
// is the spec's window applied to the client.
func (c *Conn) startSubmit(seq uint32, s *Submit) {
	c.s.Submit(func() { c.submit(seq, s) })
}

func (c *Conn) submit(seq uint32, s *Submit) {
	id := c.srv.ids.Next()
	result := c.srv.cfg.Handler.Submit(c.s.Context(), c, id, s)
	if c.version == V20 && result > 0xff {
		c.log.Error("cmpp submit result does not fit 2.0, sending 9", "result", result, "msg_id", id.String())
		result = ResultOther
	}
	b, err := Encode(c.version, seq, &SubmitResp{MsgID: id, Result: result})
	if err == nil {
		err = c.writeWait(b)
	}
	if err != nil {
		c.log.Warn("cmpp submit_resp not written", "seq", seq, "msg_id", id.String(), "err", err)
	}
	if h, ok := c.srv.cfg.Handler.(SubmitRespHandler); ok {
		h.SubmitRespWritten(c, id, result, err)
	}
}
