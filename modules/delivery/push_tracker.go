package delivery

import (
	"sync"
	"time"
)

// tracker matches CMPP DELIVER_RESPs to attempts by (connection, sequence
// id). A response may arrive before the Deliver call that wrote the
// DELIVER returned its sequence id; it is kept briefly as early and
// picked up when the attempt registers.
type tracker struct {
	mu     sync.Mutex
	byConn map[string]map[uint32]*attempt
	early  map[string]map[uint32]earlyAck
}

type earlyAck struct {
	msgID  uint64
	result uint32
	at     time.Time
}

// earlyTTL bounds how long an unmatched response is kept.
const earlyTTL = 30 * time.Second

func newTracker() *tracker {
	return &tracker{byConn: map[string]map[uint32]*attempt{}, early: map[string]map[uint32]earlyAck{}}
}

// register files a written attempt; it returns a response that arrived
// before it, if any.
func (t *tracker) register(a *attempt) (earlyAck, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.early[a.connID][a.seq]; ok {
		delete(t.early[a.connID], a.seq)
		return e, true
	}
	m := t.byConn[a.connID]
	if m == nil {
		m = map[uint32]*attempt{}
		t.byConn[a.connID] = m
	}
	m[a.seq] = a
	return earlyAck{}, false
}

// take removes and returns the attempt of (conn, seq); when none is filed
// and keepEarly is set, the response is kept for a later register.
func (t *tracker) take(conn string, seq uint32, keepEarly bool, e earlyAck) *attempt {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a, ok := t.byConn[conn][seq]; ok {
		delete(t.byConn[conn], seq)
		return a
	}
	if keepEarly {
		m := t.early[conn]
		if m == nil {
			m = map[uint32]earlyAck{}
			t.early[conn] = m
		}
		m[seq] = e
		t.pruneEarly(conn, e.at)
	}
	return nil
}

func (t *tracker) pruneEarly(conn string, now time.Time) {
	for seq, e := range t.early[conn] {
		if now.Sub(e.at) > earlyTTL {
			delete(t.early[conn], seq)
		}
	}
}

// dropConn removes and returns every attempt of a connection that ended.
func (t *tracker) dropConn(conn string) []*attempt {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*attempt
	for _, a := range t.byConn[conn] {
		out = append(out, a)
	}
	delete(t.byConn, conn)
	delete(t.early, conn)
	return out
}

// forget removes one attempt (its worker concluded it otherwise).
func (t *tracker) forget(a *attempt) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur, ok := t.byConn[a.connID][a.seq]; ok && cur == a {
		delete(t.byConn[a.connID], a.seq)
	}
}

// inFlight counts registered attempts (for tests and metrics).
func (t *tracker) inFlight() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, m := range t.byConn {
		n += len(m)
	}
	return n
}
