package cmpp

import (
	"errors"
	"fmt"
)

// readLoop reads and dispatches PDUs until the session ends.
func (c *Conn) readLoop() readEnd {
	max := MaxPDUSize(c.version)
	for {
		frame, err := ReadFrame(c.br, max)
		if err != nil {
			return readEnd{err: c.s.ReadErr(err)}
		}
		c.s.Touch()
		h, p, err := Decode(c.version, frame)
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

// badPDU answers a malformed SUBMIT with a Result (the frame boundary is
// still known, so the session can go on) and drops the connection for
// anything else.
func (c *Conn) badPDU(h Header, err error) (readEnd, bool) {
	if h.Command == CmdSubmit {
		result := ResultBadStructure
		if errors.Is(err, ErrLength) {
			result = ResultBadLength
		}
		c.log.Warn("cmpp malformed submit", "seq", h.Seq, "err", err)
		if err := c.sendPDU(h.Seq, &SubmitResp{Result: result}); err != nil {
			return readEnd{err: err}, true
		}
		return readEnd{}, false
	}
	c.log.Error("cmpp protocol error, closing", "command", h.Command.String(), "seq", h.Seq, "err", err)
	return readEnd{err: err}, true
}

func (c *Conn) dispatch(h Header, p PDU) (readEnd, bool) {
	switch p := p.(type) {
	case *Submit:
		c.startSubmit(h.Seq, p)
	case *DeliverResp:
		c.acked(h.Seq, p)
	case *ActiveTest:
		if err := c.sendPDU(h.Seq, &ActiveTestResp{}); err != nil {
			return readEnd{err: err}, true
		}
	case *ActiveTestResp:
		// liveness is recorded by touch
	case *Terminate:
		return readEnd{replySeq: &h.Seq}, true
	case *TerminateResp:
		if c.s.Leaving() {
			return readEnd{}, true
		}
		c.log.Warn("cmpp unsolicited terminate_resp", "seq", h.Seq)
	default:
		err := fmt.Errorf("%w: %s is not a request a client may send", ErrMalformed, h.Command)
		c.log.Error("cmpp protocol error, closing", "command", h.Command.String(), "seq", h.Seq, "err", err)
		return readEnd{err: err}, true
	}
	return readEnd{}, false
}
