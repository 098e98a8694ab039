package smpp

import (
	"encoding/hex"
	"sync"
	"time"
)

// MessageIDLen is the length of the ids MessageIDGenerator issues.
const MessageIDLen = 20

// MessageIDGenerator issues submit_sm_resp message_ids: 20 lower-case hex
// digits, the 16-bit node id followed by a 64-bit counter. The counter
// starts at the Unix time in microseconds and never falls behind it, so
// ids stay unique across restarts of a node (unless more than a million a
// second were issued just before one) and across nodes with distinct ids;
// within a node they increase in issue order. It is safe for concurrent
// use.
type MessageIDGenerator struct {
	node uint16
	now  func() time.Time

	mu   sync.Mutex
	last uint64
}

// NewMessageIDGenerator returns a generator for node.
func NewMessageIDGenerator(node uint16) *MessageIDGenerator {
	return &MessageIDGenerator{node: node, now: time.Now}
}

// Next returns a fresh id.
func (g *MessageIDGenerator) Next() string {
	g.mu.Lock()
	// A clock that steps back, or a burst above one id a microsecond,
	// runs the counter ahead of the clock instead of repeating an id.
	v := max(g.last+1, uint64(g.now().UnixMicro()))
	g.last = v
	g.mu.Unlock()
	var b [10]byte
	b[0], b[1] = byte(g.node>>8), byte(g.node)
	for i := range 8 {
		b[2+i] = byte(v >> (56 - 8*i))
	}
	return hex.EncodeToString(b[:])
}
