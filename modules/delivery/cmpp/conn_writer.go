package cmpp

import (
	"errors"

	"github.com/keelwork/keel/modules/delivery/internal/framewriter"
)

// closedAs reports a stopped writer as this package's ErrConnClosed.
func closedAs(err error) error {
	if errors.Is(err, framewriter.ErrStopped) {
		return ErrConnClosed
	}
	return err
}

// writeWait queues b and returns once it is written or cannot be.
func (c *Conn) writeWait(b []byte) error { return closedAs(c.wr.SendWait(b)) }

// sendPDU queues p without waiting for the write.
func (c *Conn) sendPDU(seq uint32, p PDU) error {
	b, err := Encode(c.version, seq, p)
	if err != nil {
		return err
	}
	return closedAs(c.wr.Send(b))
}
