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

// RunBatch hands consumer name's batch path the deliveries ds as one
// batch, as if they had queued together, and returns each one's outcome.
func RunBatch[TTx any](e *Events[TTx], name string) func(ctx context.Context, ds []*Delivery) []error {
	e.mu.Lock()
	c := e.consumers[name]
	e.mu.Unlock()
	return func(ctx context.Context, ds []*Delivery) []error {
		ws := make([]*waiting, len(ds))
		for i, d := range ds {
			ws[i] = &waiting{d: d, digest: Digest(d.Payload), done: make(chan error, 1)}
		}
		c.runBatch(ctx, ws, nil)
		errs := make([]error, len(ds))
		for i, w := range ws {
			errs[i] = <-w.done
		}
		return errs
	}
}
