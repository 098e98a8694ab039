package delivery

import "github.com/keelwork/keel/module"

// Nav implements module.Web.
func (m *Module[TTx]) Nav() []module.NavItem {
	return []module.NavItem{
		{Path: "/delivery/records", ZH: "下游投递记录", EN: "Deliveries"},
		{Path: "/delivery/tasks", ZH: "重投任务", EN: "Requeue tasks"},
	}
}

// Pages implements module.Web (console pages, pages.go).
func (m *Module[TTx]) Pages() []module.Page { return m.pages() }
