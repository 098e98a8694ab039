package keelevents

// Queued is how many deliveries wait for consumer name's next batch
// transaction (tests use it to hold a batch open until others queue).
func Queued[TTx any](e *Events[TTx], name string) int {
	e.mu.Lock()
	c := e.consumers[name]
	e.mu.Unlock()
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}
