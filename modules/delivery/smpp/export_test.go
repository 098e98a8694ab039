package smpp

import "time"

// SetClock replaces a generator's clock, for tests of clock steps.
func SetClock(g *MessageIDGenerator, now func() time.Time) { g.now = now }
