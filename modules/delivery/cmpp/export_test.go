package cmpp

import "time"

// SetGeneratorClock replaces a generator's clock in tests.
func SetGeneratorClock(g *MsgIDGenerator, now func() time.Time) { g.now = now }
