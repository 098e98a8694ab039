package console

import (
	"sort"

	"github.com/keelwork/keel/module"
)

// engineGroup is the key of the engine's own navigation group.
const engineGroup = "engine"

// eventsWeb is the name the events and reconciliation surface
// (keelevents/eventsweb) is hosted under: it is part of the engine, so its
// pages sit under one 事件与对账 entry of the engine's group rather than in
// a group of their own.
const eventsWeb = "events"

// navGroup is one system in the navigation: an entry in the top bar that
// opens its home, and a section of the side bar listing its pages.
type navGroup struct {
	Key    string
	ZH, EN string
	Order  int
	// Home is the group's home: the overview for the engine, a module's
	// home when it has one (Homer), else its first page.
	Home  string
	Items []navEntry
	// homer is the module's home numbers (nil: no home page).
	homer module.Homer
}

// navEntry is one page of a group; Children are a sub-section (the
// events and reconciliation pages of the engine).
type navEntry struct {
	Path     string
	ZH, EN   string
	Children []module.NavItem
}

// Name is the group's name in lang.
func (g *navGroup) Name(lang string) string {
	if lang == langEN {
		return g.EN
	}
	return g.ZH
}

// Name is the entry's name in lang.
func (e navEntry) Name(lang string) string {
	if lang == langEN {
		return e.EN
	}
	return e.ZH
}

// On reports whether path is this entry or one of its children.
func (e navEntry) On(path string) bool {
	if path == e.Path {
		return true
	}
	for _, c := range e.Children {
		if c.Path == path {
			return true
		}
	}
	return false
}

// homePath is the console path of a module's home.
func homePath(name string) string { return "/home/" + name }

// engineNav is the engine's group; events holds the events and
// reconciliation pages when that surface is hosted.
func engineNav(events []module.NavItem) *navGroup {
	g := &navGroup{Key: engineGroup, ZH: "引擎", EN: "Engine", Order: -1 << 30, Home: "/"}
	g.Items = []navEntry{
		{Path: "/", ZH: "概览", EN: "Overview"},
		{Path: "/jobs", ZH: "任务", EN: "Jobs"},
		{Path: "/queues", ZH: "队列", EN: "Queues"},
		{Path: "/keys", ZH: "流控键", EN: "Flow keys"},
		{Path: "/batches", ZH: "批量任务", EN: "Batches"},
	}
	if len(events) > 0 {
		g.Items = append(g.Items, navEntry{Path: events[0].Path, ZH: "事件与对账", EN: "Events & recon", Children: events})
	}
	g.Items = append(g.Items, navEntry{Path: "/audit", ZH: "审计日志", EN: "Audit log"})
	return g
}

// moduleNav is a module's group: the name and order it declares
// (Grouper), else its name after the engine's groups in installation
// order; its pages are its Nav items.
func moduleNav(m module.Web, index int) *navGroup {
	g := &navGroup{Key: m.Name(), ZH: m.Name(), EN: m.Name(), Order: 1000 + index}
	if gr, ok := m.(module.Grouper); ok {
		d := gr.Group()
		if d.ZH != "" {
			g.ZH = d.ZH
		}
		if d.EN != "" {
			g.EN = d.EN
		}
		g.Order = d.Order
	}
	for _, it := range m.Nav() {
		g.Items = append(g.Items, navEntry{Path: it.Path, ZH: it.ZH, EN: it.EN})
	}
	if h, ok := m.(module.Homer); ok {
		g.homer = h
		g.Home = homePath(m.Name())
	} else if len(g.Items) > 0 {
		g.Home = g.Items[0].Path
	}
	return g
}

// buildNav orders the groups: the engine first, then the modules by their
// declared order (ties by name, so the bar is the same on every instance).
// A module with no pages and no home has no group.
func buildNav(mods []module.Web) []*navGroup {
	var events []module.NavItem
	var groups []*navGroup
	for i, m := range mods {
		if m.Name() == eventsWeb {
			events = append(events, m.Nav()...)
			continue
		}
		if g := moduleNav(m, i); g.Home != "" {
			groups = append(groups, g)
		}
	}
	sort.SliceStable(groups, func(i, j int) bool {
		if groups[i].Order != groups[j].Order {
			return groups[i].Order < groups[j].Order
		}
		return groups[i].Key < groups[j].Key
	})
	return append([]*navGroup{engineNav(events)}, groups...)
}

// enginePages maps an engine page to its navigation entry.
var enginePages = map[string]string{
	"overview": "/", "jobs": "/jobs", "job": "/jobs", "queues": "/queues", "keys": "/keys", "key": "/keys",
	"batches": "/batches", "batch": "/batches", "audit": "/audit", "search": "", "home": "",
}
