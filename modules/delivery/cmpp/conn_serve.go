package cmpp

import (
	"errors"
	"net"
	"syscall"
)

// readEnd is why the read loop stopped. err is nil for a clean TERMINATE
// exchange; replySeq is set when the client sent TERMINATE and is owed a
// TERMINATE_RESP.
type readEnd struct {
	err      error
	replySeq *uint32
}

// serve runs the connection from handshake to Disconnected.
func (c *Conn) serve() {
	if err := c.handshake(); err != nil {
		c.log.Warn("cmpp handshake failed", "err", err)
		c.abort(err)
		return
	}
	c.log = c.log.With("app", c.account.AppID, "version", c.version.String())
	c.s.Start()
	c.log.Info("cmpp connected")
	c.srv.cfg.Handler.Connected(c)
	c.teardown(c.readLoop())
}

// teardown ends an established connection in order: stop new DELIVERs,
// let running Submit calls finish and their responses go out, flush the
// writer, close the socket, join the background goroutines, then tell
// the handler.
func (c *Conn) teardown(end readEnd) {
	c.s.Stop()
	if end.replySeq != nil {
		if err := c.sendPDU(*end.replySeq, &TerminateResp{}); err != nil {
			c.log.Debug("cmpp terminate_resp not sent", "err", err)
		}
	}
	err := c.s.Finish(end.err)
	switch {
	case errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed):
		// The peer went away (its stop, its crash): a disconnect, not a
		// fault of this side; what was in flight is settled by the ACK rules.
		c.log.Info("cmpp disconnected: the peer closed the connection", "err", err)
	case err != nil:
		c.log.Warn("cmpp disconnected", "err", err)
	default:
		c.log.Info("cmpp disconnected")
	}
	c.srv.cfg.Handler.Disconnected(c, err)
}
