package keelevents

import "context"

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

// HandleWindow is consumer name's window handler, for tests that hand it
// deliveries as a windowed bus would.
func HandleWindow[TTx any](e *Events[TTx], name string) func(ctx context.Context, ds []*Delivery) []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.consumers[name].handleWindow
}
