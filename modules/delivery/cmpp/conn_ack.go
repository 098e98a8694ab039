package cmpp

// lateAckMemory is how many timed-out DELIVERs a connection remembers so
// a late DELIVER_RESP can still be reported.
const lateAckMemory = 256

// lateAcks is a bounded seq → Msg_Id memory of timed-out DELIVERs.
type lateAcks struct {
	ids   map[uint32]MsgID
	order []uint32
}

func (l *lateAcks) add(seq uint32, id MsgID) {
	if l.ids == nil {
		l.ids = map[uint32]MsgID{}
	}
	if len(l.order) == lateAckMemory {
		delete(l.ids, l.order[0])
		l.order = l.order[1:]
	}
	l.ids[seq] = id
	l.order = append(l.order, seq)
}

func (l *lateAcks) take(seq uint32) (MsgID, bool) {
	id, ok := l.ids[seq]
	delete(l.ids, seq) // its entry in order just ages out
	return id, ok
}

// acked matches a DELIVER_RESP to its DELIVER by sequence id.
func (c *Conn) acked(seq uint32, resp *DeliverResp) {
	if p, ok := c.resolve(seq); ok {
		if resp.MsgID != p.msgID {
			c.log.Warn("cmpp deliver_resp echoes another msg_id", "seq", seq,
				"sent", p.msgID.String(), "echoed", resp.MsgID.String())
		}
		c.srv.cfg.Handler.DeliverResp(c, seq, resp)
		return
	}
	c.mu.Lock()
	id, late := c.late.take(seq)
	c.mu.Unlock()
	if !late {
		c.log.Warn("cmpp deliver_resp for no outstanding deliver", "seq", seq, "result", resp.Result)
		return
	}
	c.log.Warn("cmpp late deliver_resp", "seq", seq, "msg_id", id.String(), "result", resp.Result)
	if h, ok := c.srv.cfg.Handler.(LateAckHandler); ok {
		h.LateDeliverResp(c, seq, id, resp)
	}
}

// expireLoop reports DELIVERs whose ack timer fired. It runs on its own
// goroutine so the reports stop before Disconnected.
func (c *Conn) expireLoop() {
	for {
		select {
		case p := <-c.expired:
			c.expire(p)
		case <-c.ctx.Done():
			return
		}
	}
}

func (c *Conn) expire(p *pending) {
	c.mu.Lock()
	if c.pending[p.seq] != p {
		c.mu.Unlock()
		return
	}
	delete(c.pending, p.seq)
	c.late.add(p.seq, p.msgID)
	c.mu.Unlock()
	<-c.window
	c.log.Warn("cmpp deliver_resp timed out", "seq", p.seq, "msg_id", p.msgID.String())
	if h, ok := c.srv.cfg.Handler.(AckTimeoutHandler); ok {
		h.AckTimeout(c, p.seq, p.msgID)
	}
}

// dropPending forgets outstanding DELIVERs when the connection ends; the
// handler learns of them through Disconnected.
func (c *Conn) dropPending() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for seq, p := range c.pending {
		if p.timer != nil {
			p.timer.Stop()
		}
		delete(c.pending, seq)
	}
}
