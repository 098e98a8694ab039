package smpp

// lateAckMemory is how many timed-out deliver_sm a connection remembers
// so a late response can still be reported.
const lateAckMemory = 256

// lateAcks is a bounded set of the sequence numbers of timed-out
// deliver_sm.
type lateAcks struct {
	seqs  map[uint32]bool
	order []uint32
}

func (l *lateAcks) add(seq uint32) {
	if l.seqs == nil {
		l.seqs = map[uint32]bool{}
	}
	if len(l.order) == lateAckMemory {
		delete(l.seqs, l.order[0])
		l.order = l.order[1:]
	}
	l.seqs[seq] = true
	l.order = append(l.order, seq)
}

func (l *lateAcks) take(seq uint32) bool {
	ok := l.seqs[seq]
	delete(l.seqs, seq) // its entry in order just ages out
	return ok
}

// acked matches a deliver_sm_resp to its deliver_sm by sequence number.
func (c *Conn) acked(seq uint32, resp *DeliverSMResp) {
	if c.resolve(seq) {
		c.srv.cfg.Handler.DeliverResp(c, seq, resp)
		return
	}
	c.mu.Lock()
	late := c.late.take(seq)
	c.mu.Unlock()
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
	c.mu.Lock()
	_, out := c.pending[seq]
	c.mu.Unlock()
	if out {
		c.acked(seq, &DeliverSMResp{Status: n.Status})
		return
	}
	c.log.Warn("smpp generic_nack from the ESME", "seq", seq, "status", StatusName(n.Status))
}

// expireLoop reports deliver_sm whose ack timer fired. It runs on its own
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
	c.late.add(p.seq)
	c.mu.Unlock()
	<-c.window
	c.log.Warn("smpp deliver_sm_resp timed out", "seq", p.seq)
	if h, ok := c.srv.cfg.Handler.(AckTimeoutHandler); ok {
		h.AckTimeout(c, p.seq)
	}
}

// dropPending forgets outstanding deliver_sm when the connection ends;
// the handler learns of them through Disconnected.
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
