package cmpp

import "time"

// keepalive implements the spec's link test: after ActiveTestIdle with
// nothing received, send ACTIVE_TEST; if nothing arrives within
// ActiveTestTimeout send another at once; after ActiveTestMisses
// unanswered tests drop the connection. Any received PDU counts as an
// answer, because it proves the peer is alive as well as a response does.
func (c *Conn) keepalive() {
	cfg := c.srv.cfg
	idle := time.NewTimer(cfg.ActiveTestIdle)
	defer idle.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.activity:
			idle.Reset(cfg.ActiveTestIdle)
		case <-idle.C:
			if !c.probe() {
				c.log.Warn("cmpp active test unanswered, dropping", "misses", cfg.ActiveTestMisses)
				c.abort(ErrActiveTestTimeout)
				return
			}
			idle.Reset(cfg.ActiveTestIdle)
		}
	}
}

// probe sends up to ActiveTestMisses link tests and reports whether the
// peer showed any sign of life (or the connection ended meanwhile).
func (c *Conn) probe() bool {
	cfg := c.srv.cfg
	select {
	case <-c.activity: // stale: it raced with the idle timer
	default:
	}
	for range cfg.ActiveTestMisses {
		if err := c.sendPDU(c.nextSeq(), &ActiveTest{}); err != nil {
			return true // the writer stopped: teardown is under way
		}
		wait := time.NewTimer(cfg.ActiveTestTimeout)
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
