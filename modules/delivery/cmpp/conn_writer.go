package cmpp

// writeWait queues b and returns once it is written or cannot be.
func (c *Conn) writeWait(b []byte) error { return c.s.SendWait(b) }

// sendPDU queues p without waiting for the write.
func (c *Conn) sendPDU(seq uint32, p PDU) error {
	b, err := Encode(c.version, seq, p)
	if err != nil {
		return err
	}
	return c.s.Send(b)
}
