package smpp

import (
	"fmt"
	"time"
)

// outFrame is one encoded PDU for the writer; done, when set, receives
// the write's result.
type outFrame struct {
	b    []byte
	done chan error
}

// writeLoop is the connection's only writer, so PDUs never interleave.
// On stopWriter it writes what is already queued and exits.
func (c *Conn) writeLoop() {
	defer close(c.writerDone)
	for {
		select {
		case f := <-c.out:
			if !c.write(f) {
				return
			}
		case <-c.stopWriter:
			c.drain()
			return
		}
	}
}

func (c *Conn) drain() {
	for {
		select {
		case f := <-c.out:
			if !c.write(f) {
				return
			}
		default:
			return
		}
	}
}

func (c *Conn) write(f *outFrame) bool {
	c.nc.SetWriteDeadline(time.Now().Add(c.srv.cfg.WriteTimeout))
	_, err := c.nc.Write(f.b)
	if f.done != nil {
		f.done <- err
	}
	if err != nil {
		c.abort(fmt.Errorf("writing pdu: %w", err))
		return false
	}
	return true
}

// enqueue hands f to the writer; it fails once the writer has stopped.
func (c *Conn) enqueue(f *outFrame) error {
	select {
	case c.out <- f:
		return nil
	case <-c.writerDone:
		return ErrConnClosed
	}
}

// sendPDU queues p without waiting for the write.
func (c *Conn) sendPDU(seq uint32, p PDU) error {
	b, err := Encode(seq, p)
	if err != nil {
		return err
	}
	return c.enqueue(&outFrame{b: b})
}

// writeWait queues b and returns once it is written or cannot be.
func (c *Conn) writeWait(b []byte) error {
	f := &outFrame{b: b, done: make(chan error, 1)}
	if err := c.enqueue(f); err != nil {
		return err
	}
	select {
	case err := <-f.done:
		return err
	case <-c.writerDone:
		select {
		case err := <-f.done: // written just before the writer stopped
			return err
		default:
			return ErrConnClosed
		}
	}
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
