package delivery

import (
	"context"
	"strings"
	"sync"
)

// appCache holds every application in memory: pushes, authentication and
// MO routing read it on every message. It is refreshed on each presence
// heartbeat and after local changes, so another instance's change is
// seen within a heartbeat.
type appCache struct {
	mu        sync.RWMutex
	byID      map[int64]*Application
	byAccount map[string]*Application
	list      []*Application
}

func newAppCache() *appCache {
	return &appCache{byID: map[int64]*Application{}, byAccount: map[string]*Application{}}
}

func (c *appCache) load(apps []*Application) {
	byID := make(map[int64]*Application, len(apps))
	byAccount := make(map[string]*Application, len(apps))
	for _, a := range apps {
		byID[a.ID], byAccount[a.Account] = a, a
	}
	c.mu.Lock()
	c.byID, c.byAccount, c.list = byID, byAccount, apps
	c.mu.Unlock()
}

func (c *appCache) get(id int64) (*Application, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	a, ok := c.byID[id]
	return a, ok
}

func (c *appCache) account(acct string) (*Application, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	a, ok := c.byAccount[acct]
	return a, ok
}

// moRoute finds the application whose MO code is the longest prefix of
// destID.
func (c *appCache) moRoute(destID string) (*Application, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var best *Application
	for _, a := range c.list {
		if a.MOCode != "" && strings.HasPrefix(destID, a.MOCode) && (best == nil || len(a.MOCode) > len(best.MOCode)) {
			best = a
		}
	}
	return best, best != nil
}

func (c *appCache) all() []*Application {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.list
}

func (m *Module[TTx]) refreshApps(ctx context.Context) error {
	apps, err := m.st.apps(ctx)
	if err != nil {
		return err
	}
	m.apps.load(apps)
	return nil
}
