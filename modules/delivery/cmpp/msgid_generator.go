package cmpp

import (
	"fmt"
	"sync"
	"time"
)

// MsgIDGenerator issues Msg_Ids for one gateway id. It is safe for
// concurrent use.
//
// The sequence restarts at 0 every second and counts up to 65535. When a
// second's sequence is used up, or the wall clock steps back, the
// generator keeps a logical clock that runs ahead of the wall clock
// instead of repeating an id; it falls back to the wall clock once that
// catches up. So ids from one generator never repeat (within the year the
// format can tell apart) and, within a year, increase in issue order.
type MsgIDGenerator struct {
	gateway uint32
	loc     *time.Location
	now     func() time.Time

	mu   sync.Mutex
	sec  int64 // logical unix second of the last id
	next uint32
}

// NewMsgIDGenerator returns a generator for gateway (at most
// MaxGatewayID) whose time fields are read in loc (time.Local when nil).
func NewMsgIDGenerator(gateway uint32, loc *time.Location) (*MsgIDGenerator, error) {
	if gateway > MaxGatewayID {
		return nil, fmt.Errorf("gateway id %d exceeds the 22-bit field (max %d)", gateway, MaxGatewayID)
	}
	if loc == nil {
		loc = time.Local
	}
	return &MsgIDGenerator{gateway: gateway, loc: loc, now: time.Now}, nil
}

// Next returns a fresh Msg_Id.
func (g *MsgIDGenerator) Next() MsgID {
	g.mu.Lock()
	sec, seq := g.step(g.now().Unix())
	g.mu.Unlock()
	t := time.Unix(sec, 0).In(g.loc)
	return MakeMsgID(MsgIDParts{
		Month: int(t.Month()), Day: t.Day(),
		Hour: t.Hour(), Minute: t.Minute(), Second: t.Second(),
		Gateway: g.gateway, Seq: seq,
	})
}

// step advances the logical clock to wall and takes the next sequence.
func (g *MsgIDGenerator) step(wall int64) (int64, uint16) {
	if wall > g.sec {
		g.sec, g.next = wall, 0
	}
	if g.next > 0xffff {
		g.sec, g.next = g.sec+1, 0
	}
	seq := uint16(g.next)
	g.next++
	return g.sec, seq
}
