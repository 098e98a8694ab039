package smpp

import (
	"fmt"
	"time"
)

// writeWait queues b and returns once it is written or cannot be.
func (c *Conn) writeWait(b []byte) error { return c.s.SendWait(b) }

// sendPDU queues p without waiting for the write.
func (c *Conn) sendPDU(seq uint32, p PDU) error {
	b, err := Encode(seq, p)
	if err != nil {
		return err
	}
	return c.s.Send(b)
}

// writeDirect writes before the writer goroutine exists (during the bind).
func (c *Conn) writeDirect(seq uint32, p PDU) error {
	b, err := Encode(seq, p)
	if err != nil {
		return err
	}
	c.nc.SetWriteDeadline(time.Now().Add(c.srv.cfg.WriteTimeout))
	if _, err := c.nc.Write(b); err != nil {
		return fmt.Errorf("writing %s: %w", p.Command(), err)
	}
	return nil
}
