package delivery

import (
	"context"
	"sync"
	"time"
)

// keyGate counts, per flow key, the task items whose outcome is known here
// but not yet counted by the engine (settled). A write of that key waits
// for them before its check of the auto-pause: an outcome known before the
// write has then been counted — failures and successes in the order they
// came, so a success is never counted after a later failure — and if a
// failure reached the threshold the check sees the pause: no DELIVER
// leaves after the pause for a failure that was known before it. (One
// sending instance per application makes this local count the whole
// count; see "Where pushes are claimed".)
type keyGate struct {
	mu sync.Mutex
	n  map[string]int
	// gen counts the outcomes ever added per key, so that a check sees
	// whether one came meanwhile. It keeps one number per task application
	// this process sent for (never reset: a reset could hide an outcome that
	// came and was counted during a check).
	gen map[string]uint64
	ch  map[string]chan struct{}
}

func newKeyGate() *keyGate {
	return &keyGate{n: map[string]int{}, gen: map[string]uint64{}, ch: map[string]chan struct{}{}}
}

func (g *keyGate) add(key string) {
	g.mu.Lock()
	g.n[key]++
	g.gen[key]++
	g.mu.Unlock()
}

// changed reports whether an outcome of key was added since wait returned gen.
func (g *keyGate) changed(key string, gen uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gen[key] != gen
}

func (g *keyGate) done(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n[key]--; g.n[key] > 0 {
		return
	}
	delete(g.n, key)
	if c, ok := g.ch[key]; ok {
		close(c)
		delete(g.ch, key)
	}
}

// wait returns once no failure of key is pending, or after max (the
// settle retries for up to a few seconds; the check then reads whatever
// the engine has).
func (g *keyGate) wait(ctx context.Context, key string, max time.Duration) (uint64, error) {
	t := time.NewTimer(max)
	defer t.Stop()
	for {
		g.mu.Lock()
		if g.n[key] == 0 {
			gen := g.gen[key]
			g.mu.Unlock()
			return gen, nil
		}
		c, ok := g.ch[key]
		if !ok {
			c = make(chan struct{})
			g.ch[key] = c
		}
		g.mu.Unlock()
		select {
		case <-c:
		case <-t.C:
			return g.generation(key), nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// gateWait bounds a write's wait for pending failures of its key.
const gateWait = 5 * time.Second

func (g *keyGate) generation(key string) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gen[key]
}
