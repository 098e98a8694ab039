package smpp

import "time"

// keepalive checks the link: after EnquireLinkIdle with nothing received,
// send enquire_link; if nothing arrives within EnquireLinkTimeout send
// another at once; after EnquireLinkMisses unanswered ones drop the
// connection. Any received PDU counts as an answer, because it proves
// the peer is alive as well as a response does.
func (c *Conn) keepalive() {
	cfg := c.srv.cfg
	idle := time.NewTimer(cfg.EnquireLinkIdle)
	defer idle.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.activity:
			idle.Reset(cfg.EnquireLinkIdle)
		case <-idle.C:
			if !c.probe() {
				c.log.Warn("smpp enquire_link unanswered, dropping", "misses", cfg.EnquireLinkMisses)
				c.abort(ErrEnquireLinkTimeout)
				return
			}
			idle.Reset(cfg.EnquireLinkIdle)
		}
	}
}

// probe sends up to EnquireLinkMisses enquire_links and reports whether
// the peer showed any sign of life (or the connection ended meanwhile).
func (c *Conn) probe() bool {
	cfg := c.srv.cfg
	select {
	case <-c.activity: // stale: it raced with the idle timer
	default:
	}
	for range cfg.EnquireLinkMisses {
		if err := c.sendPDU(c.nextSeq(), &EnquireLink{}); err != nil {
			return true // the writer stopped: teardown is under way
		}
		wait := time.NewTimer(cfg.EnquireLinkTimeout)
		select {
		case <-c.activity:
			wait.Stop()
			return true
		case <-c.ctx.Done():
			wait.Stop()
			return true
		case <-wait.C:
		}
	}
	return false
}
