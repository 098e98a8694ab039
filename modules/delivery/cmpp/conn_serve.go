package cmpp

import (
	"errors"
	"io"
	"net"
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
	defer c.srv.forget(c)
	if err := c.handshake(); err != nil {
		c.log.Warn("cmpp handshake failed", "err", err)
		c.abort(err)
		return
	}
	c.log = c.log.With("app", c.account.AppID, "version", c.version.String())
	c.bg.Add(3)
	go func() { defer c.bg.Done(); c.wr.Run() }()
	go func() { defer c.bg.Done(); c.keepalive() }()
	go func() { defer c.bg.Done(); c.expireLoop() }()
	if !c.establish() {
		c.abort(ErrServerClosed)
	}
	c.log.Info("cmpp connected")
	c.srv.cfg.Handler.Connected(c)
	c.teardown(c.readLoop())
}

// teardown ends an established connection in order: stop new DELIVERs,
// let running Submit calls finish and their responses go out, flush the
// writer, close the socket, join the background goroutines, then tell
// the handler.
func (c *Conn) teardown(end readEnd) {
	close(c.done)
	c.submits.Wait()
	if end.replySeq != nil {
		if err := c.sendPDU(*end.replySeq, &TerminateResp{}); err != nil {
			c.log.Debug("cmpp terminate_resp not sent", "err", err)
		}
	}
	c.wr.Stop()
	c.abort(end.err)
	c.bg.Wait()
	c.dropPending()
	err, _ := c.getCause()
	if err != nil {
		c.log.Warn("cmpp disconnected", "err", err)
	} else {
		c.log.Info("cmpp disconnected")
	}
	c.srv.cfg.Handler.Disconnected(c, err)
}

// readErr names why reading stopped: the cause recorded by whoever
// dropped the connection, or the read error itself.
func (c *Conn) readErr(err error) error {
	if cause, ok := c.getCause(); ok {
		return cause
	}
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		if c.terminating.Load() {
			return nil // we asked the client to leave and it did
		}
		return errors.Join(ErrPeerClosed, err)
	}
	return err
}
