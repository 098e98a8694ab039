package smpp

// readEnd is why the read loop stopped. err is nil for a clean unbind
// exchange; replySeq is set when the ESME sent unbind and is owed an
// unbind_resp.
type readEnd struct {
	err      error
	replySeq *uint32
}

// serve runs the connection from bind to Disconnected.
func (c *Conn) serve() {
	if err := c.bind(); err != nil {
		c.log.Warn("smpp bind failed", "err", err)
		c.abort(err)
		return
	}
	c.log = c.log.With("app", c.account.AppID, "system_id", c.systemID, "bind", c.bindType.String())
	c.s.Start()
	c.log.Info("smpp bound")
	c.srv.cfg.Handler.Connected(c)
	c.teardown(c.readLoop())
}

// teardown ends a bound connection in order: stop new deliver_sm, let
// running Submit calls finish and their responses go out, flush the
// writer, close the socket, join the background goroutines, then tell
// the handler.
func (c *Conn) teardown(end readEnd) {
	if end.err == nil {
		// The unbind exchange decided the outcome; an ESME that hangs up
		// right after its unbind (many do) must not turn our unbind_resp
		// write into an error.
		c.s.SetCause(nil)
	}
	c.s.Stop()
	if end.replySeq != nil {
		if err := c.sendPDU(*end.replySeq, &UnbindResp{}); err != nil {
			c.log.Debug("smpp unbind_resp not sent", "err", err)
		}
	}
	err := c.s.Finish(end.err)
	if err != nil {
		c.log.Warn("smpp disconnected", "err", err)
	} else {
		c.log.Info("smpp unbound")
	}
	c.srv.cfg.Handler.Disconnected(c, err)
}
