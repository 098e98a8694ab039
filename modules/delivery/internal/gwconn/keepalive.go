package gwconn

import "time"

// Touch tells the link test the peer is alive. Any received PDU counts as
// an answer, because it proves the peer is alive as well as a response
// does.
func (s *Session[V]) Touch() {
	select {
	case s.activity <- struct{}{}:
	default:
	}
}

func (s *Session[V]) keepalive() {
	idle := time.NewTimer(s.cfg.LinkIdle)
	defer idle.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.activity:
			idle.Reset(s.cfg.LinkIdle)
		case <-idle.C:
			if !s.alive() {
				s.silent()
				return
			}
			idle.Reset(s.cfg.LinkIdle)
		}
	}
}

// alive sends up to LinkMisses link tests and reports whether the peer
// showed any sign of life (or the connection ended meanwhile).
func (s *Session[V]) alive() bool {
	select {
	case <-s.activity: // stale: it raced with the idle timer
	default:
	}
	for range s.cfg.LinkMisses {
		if err := s.probe(); err != nil {
			return true // the writer stopped: teardown is under way
		}
		wait := time.NewTimer(s.cfg.LinkTimeout)
		select {
		case <-s.activity:
			wait.Stop()
			return true
		case <-s.ctx.Done():
			wait.Stop()
			return true
		case <-wait.C:
		}
	}
	return false
}
