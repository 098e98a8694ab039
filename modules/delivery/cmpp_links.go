package delivery

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/keelwork/keel/modules/delivery/cmpp"
)

// link is what a push needs of a customer's CMPP connection (*cmpp.Conn).
type link interface {
	ID() string
	Version() cmpp.Version
	NewMsgID() cmpp.MsgID
	Deliver(ctx context.Context, d *cmpp.Deliver) (uint32, error)
}

var (
	// errNoLink: this instance holds no live connection of the application.
	errNoLink = errors.New("delivery: no connection of the application on this instance")
	// errLinksBusy: every connection's window stayed full for the wait.
	errLinksBusy = errors.New("delivery: every connection's window is full")
)

// links are the live CMPP connections this instance holds, per
// application, with a window slot count per connection. A push takes a
// slot before it claims its record, so a push waiting for room never
// holds a record in awaiting_ack; the slot is freed by the ACK, its
// timeout or the connection's end.
type links struct {
	window int
	mu     sync.Mutex
	apps   map[int64]*appLinks
}

type appLinks struct {
	conns  []*slotted
	next   int
	notify chan struct{} // closed and replaced whenever a slot frees or a connection arrives
}

type slotted struct {
	l        link
	inflight int
	gone     bool
}

func newLinks(window int) *links { return &links{window: window, apps: map[int64]*appLinks{}} }

func (ls *links) app(id int64) *appLinks {
	a := ls.apps[id]
	if a == nil {
		a = &appLinks{notify: make(chan struct{})}
		ls.apps[id] = a
	}
	return a
}

// add registers a connection; it reports whether it is the application's
// first on this instance.
func (ls *links) add(appID int64, l link) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	a := ls.app(appID)
	a.conns = append(a.conns, &slotted{l: l})
	a.wakeLocked()
	return len(a.conns) == 1
}

// remove forgets a connection; it reports whether the application has
// none left here.
func (ls *links) remove(appID int64, id string) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	a := ls.apps[appID]
	if a == nil {
		return true
	}
	for i, s := range a.conns {
		if s.l.ID() == id {
			s.gone = true
			a.conns = append(a.conns[:i], a.conns[i+1:]...)
			break
		}
	}
	a.wakeLocked()
	if len(a.conns) == 0 {
		delete(ls.apps, appID)
		return true
	}
	return false
}

func (a *appLinks) wakeLocked() {
	close(a.notify)
	a.notify = make(chan struct{})
}

// reserve takes a window slot on one of the application's connections,
// rotating among those with room. It waits up to maxWait for room; it
// returns errNoLink at once when the application has no connection here.
func (ls *links) reserve(ctx context.Context, appID int64, maxWait time.Duration) (link, func(), error) {
	deadline := time.NewTimer(maxWait)
	defer deadline.Stop()
	for {
		l, release, wait, err := ls.tryReserve(appID)
		if err != nil || l != nil {
			return l, release, err
		}
		select {
		case <-wait:
		case <-deadline.C:
			return nil, nil, errLinksBusy
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

func (ls *links) tryReserve(appID int64) (link, func(), <-chan struct{}, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	a := ls.apps[appID]
	if a == nil || len(a.conns) == 0 {
		return nil, nil, nil, errNoLink
	}
	for i := range a.conns {
		s := a.conns[(a.next+i)%len(a.conns)]
		if s.inflight < ls.window {
			a.next = (a.next + i + 1) % len(a.conns)
			s.inflight++
			return s.l, ls.releaser(a, s), nil, nil
		}
	}
	return nil, nil, a.notify, nil
}

func (ls *links) releaser(a *appLinks, s *slotted) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			ls.mu.Lock()
			defer ls.mu.Unlock()
			s.inflight--
			a.wakeLocked()
		})
	}
}

// has reports whether the application has a connection here.
func (ls *links) has(appID int64) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	a := ls.apps[appID]
	return a != nil && len(a.conns) > 0
}

// hasConn reports whether connection id of the application is live here.
func (ls *links) hasConn(appID int64, id string) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	a := ls.apps[appID]
	if a == nil {
		return false
	}
	for _, s := range a.conns {
		if s.l.ID() == id && !s.gone {
			return true
		}
	}
	return false
}

// held lists the applications with connections here, by id.
func (ls *links) held() []heldApp {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	out := make([]heldApp, 0, len(ls.apps))
	for id, a := range ls.apps {
		if len(a.conns) > 0 {
			out = append(out, heldApp{AppID: id, Conns: len(a.conns)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AppID < out[j].AppID })
	return out
}
